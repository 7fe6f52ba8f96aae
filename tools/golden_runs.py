"""Golden CPU runs of each training family (fl, pfl, zo): the guard of issue 25's refactor onto one engine.

Issue 25: "Before touching it, record golden CPU runs of each family on small fixed configs ... and keep them
bit-identical on the same CPU afterwards (or explain each difference)". This module is that record and its
check::

    python -m tools.golden_runs record [--only NAME ...] [--file PATH]   # (re)write the golden file
    python -m tools.golden_runs check  [--only NAME ...] [--file PATH]   # compare; exit 1 on a difference
    python -m tools.golden_runs list                                     # the registered runs

What a run is. :data:`RUNS` registers one small fixed configuration per entry (a few seconds each on one CPU
core), each called through its family's highest-level entry point that takes a configuration and returns a
result, so that the guard outlives the rewrite of the round loops (at most an import line changes):

* ``fl_*``: :func:`benchmark.fl.methods.run_method` (FT under FedAvg, FedProx, FedAdam; the vectorised
  executor; LP then FT; LP on cached features) on a tiny float64 conv net with BatchNorm and random data;
* ``pfl_*``: :meth:`benchmark.pfl.trainer.PFLTrainer.run` (FedBABU, FedAvg, FedRep, Ditto, Per-FedAvg,
  LG-FedAvg, FedPer; the per-client loop and, where the algorithm allows it, the lock-step vectorised
  execution) on the 4convNet and random 32x32 uint8 images, float64 (``PFLConfig.dtype``, the portable pins)
  plus one float32 FedBABU run (the dtype of real runs);
* ``zo_*``: :func:`benchmark.zo.run.run_zo` (MeZO, FedMeZO, DistMeZO) and :func:`benchmark.zo.slora.run_slora`
  (SLoRA) on a tiny random BERT and random token ids, with the FedNCM head of the real pipeline.

Each run is recorded as: the sha256 of its final model state (for each entry in sorted key order: the key, the
dtype, the shape and the raw bytes), the number of rounds, the per-round history that matters (losses,
accuracies, clients, bytes; never wall time) and the summary numbers (best / last / selected accuracy). Floats
are stored as JSON numbers: Python writes the shortest decimal that reads back to the same double, so the
stored value *is* the bit pattern (``float.hex`` would say the same thing less readably).

Comparison. The file carries the fingerprint of the machine that recorded it (:func:`fingerprint`: CPU model,
ids and vector extensions, torch's CPU kernel level, torch and numpy versions, torch threads, Python). On a
machine with the same fingerprint every value must be identical, the state sha256 included. On another machine
the sha256 cannot be expected to match (other kernels sum in another order), so it is skipped (and the report
says so), integers and strings must still be equal and floats must agree within :data:`TOLERANCE` (relative
1e-4, absolute 1e-6; stored in the file). Everything runs with one torch thread, deterministic algorithms on,
and every global RNG seeded before each run.

The rest of the guard: the existing tests that pin the training code by an equality (to keep green through
issue 25; ``python -m pytest FILE -q -p no:cacheprovider``; ``realdata``: needs FLB_DATA_ROOT, ``slow``:
opt-in):

* ``tests/test_fl_engine.py``: ``test_fedavg_one_client_one_step_equals_centralised_sgd``,
  ``test_fedprox_mu_zero_equals_fedavg``, ``test_fedprox_step_is_gradient_of_proximal_objective``,
  ``test_fedadam_one_step_matches_hand_computation``, ``test_fedadam_equals_torch_adam_over_steps``,
  ``test_fedavgm_equals_torch_sgd_momentum_and_fedavg_is_average``,
  ``test_lp_leaves_every_body_tensor_bit_identical_under_fedadam``, ``test_bn_frozen_global_vs_aggregate``,
  ``test_two_stage_starts_from_exactly_the_closed_form_head``, ``test_same_seed_identical_curves_on_cpu``,
  ``test_client_sampling_reproducible_and_independent_of_model_seed``,
  ``test_ft_oracle_equals_centralised_sgd_epoch``;
* ``tests/test_fl_vectorised.py`` (vectorised == loop, float64 to 1e-12):
  ``test_vectorised_round_equals_loop``, ``test_every_chunk_size_gives_the_loop_round``,
  ``test_partial_participation_body_only_and_reference_drift``,
  ``test_lp_body_in_train_mode_and_empty_clients``, ``test_the_comparison_catches_a_dropped_fedprox_term``,
  ``test_image_set_clients_equal_the_loop_and_the_run_records_agree``;
* ``tests/test_fl_lp_features.py``: ``test_vectorised_equals_per_client_loop_float64`` / ``_float32``,
  ``test_cached_feature_lp_equals_lp_with_frozen_body_in_the_loop``,
  ``test_lp_oracle_equals_centralised_sgd``;
* ``tests/test_fl_checkpoint.py`` (resume bit-identical): ``test_resume_after_sigkill_is_bit_identical``,
  ``test_cached_feature_lp_resumes_bit_identically``, ``test_measured_communication_equals_arithmetic_ft``,
  ``test_measured_communication_of_vectorised_clients_equals_the_loops``;
* ``tests/test_fl_image_data.py``:
  ``test_fetch_batch_and_local_sgd_on_an_image_set_equal_the_preprocessed_tensors``;
  ``tests/contracts/test_fl_method_contract.py``: ``test_one_client_equals_centralised_oracle``;
  ``tests/test_fl_jobs.py``: ``test_same_seed_same_curve_other_seed_differs``;
* pinned reduced runs:
  ``tests/test_apps_reduced.py::test_reduced_ft_and_fedncm_ft_reproduce_the_pinned_values``,
  ``tests/test_fl_train_job.py::``
  ``test_a_killed_training_job_resumes_from_its_checkpoint_with_an_identical_result``,
  ``tests/test_pfl_reduced.py::test_the_reduced_runs_through_the_runner_equal_the_pins`` (realdata);
* ``tests/test_pfl_core.py`` (realdata): ``test_fedbabu_head_stays_bit_identical_to_its_initialisation``,
  ``test_fedavg_with_a_frozen_aggregated_head_updates_the_body_as_fedbabu``,
  ``test_fedper_aggregates_no_head_and_keeps_personal_heads``,
  ``test_one_client_full_participation_is_centralised_sgd``, ``test_train_step_is_bit_identical_for_a_seed``,
  ``test_a_resumed_run_equals_an_uninterrupted_one``,
  ``test_one_training_writes_both_selections_as_their_own_jobs_would``;
* ``tests/test_pfl_vectorised.py``: ``test_vectorised_round_equals_the_loop``,
  ``test_fedbabu_float32_head_bit_identical_over_rounds_body_close``,
  ``test_personalise_vectorised_equals_personalise``;
* ``tests/test_pfl_procedures.py``: ``test_a_round_is_bit_identical_when_run_twice``,
  ``test_fedrep_update_trains_the_head_then_the_body_with_one_optimiser``,
  ``test_ditto_personal_models_survive_a_checkpoint``, ``test_per_fedavg_meta_steps_follow_the_reference``,
  ``test_centralised_body_keeps_the_initial_head_and_is_bit_identical``;
* ``tests/test_zo_fedmezo.py``: ``test_fedmezo_equals_centralised_mezo_with_accumulation_bit_for_bit``
  (FedMeZO == MeZO), ``test_every_client_reconstructs_the_servers_weights_and_the_log_is_the_model``,
  ``test_resume_from_a_log_equals_an_uninterrupted_run``, ``test_copy_restore_is_exact_in_every_dtype``,
  ``test_iid_and_non_iid_partitions_follow_the_same_trajectory_and_distmezo_does_not``;
* ``tests/test_zo_slora.py``: ``test_one_client_equals_centralised_sgd_bit_for_bit``,
  ``test_a_seed_fixes_the_run``, ``test_stage2_keeps_the_base_bit_identical_and_trains_only_lora_and_head``;
  ``tests/test_zo_runner.py::test_train_step_on_real_minilm_writes_a_resumable_record`` (slow, realdata);
* ``tests/test_zo_resume.py``: ``test_a_killed_distmezo_run_resumes_bit_identically``,
  ``test_a_killed_slora_run_resumes_bit_identically``;
* the engine's shared parts: ``tests/test_federated_vectorised.py`` (both SGD step orders, ragged chunks ==
  per-client SGD), ``tests/test_federated_images.py`` (fedbabu's crop + flip == a per-image reference),
  ``tests/test_federated_precision.py``;
* seeding and partitions: ``tests/test_seeding.py::test_pinned_stream_states``,
  ``tests/test_partition.py::test_pinned_hashes``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILE = ROOT / "tests" / "golden" / "golden_runs.json"
#: Float tolerance between machines with different fingerprints (same machine: exact).
TOLERANCE = {"rel": 1e-4, "abs": 1e-6}
FORMAT = 1


# ------------------------------------------------------------------------------------------------ outcome
@dataclass
class Outcome:
    """What one run produced: its final state (tensors), per-round history rows and summary numbers."""

    state: Mapping[str, torch.Tensor]
    history: list[dict[str, Any]]
    summary: dict[str, Any] = field(default_factory=dict)


def state_sha256(state: Mapping[str, torch.Tensor]) -> str:
    """sha256 over the entries in sorted key order: key, dtype, shape, raw bytes (any dtype, bfloat16 too)."""
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _plain(x: Any) -> Any:
    """JSON-ready value: numpy / torch scalars to Python, tuples to lists, dicts recursively."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple | np.ndarray):
        return [_plain(v) for v in x]
    if isinstance(x, torch.Tensor):
        return _plain(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    return x


def describe(out: Outcome) -> dict[str, Any]:
    """The record of one outcome (module docstring)."""
    return {
        "rounds": len(out.history),
        "state_sha256": state_sha256(out.state),
        "state_entries": len(out.state),
        "history": _plain(out.history),
        "summary": _plain(out.summary),
    }


# ------------------------------------------------------------------------------------------------ fl
def _fl_model() -> nn.Module:
    """conv -> BN -> ReLU -> pool body and a linear head, float64, random "pre-trained" weights, BN stats."""
    from benchmark.models.classifier import Classifier

    class TinyBody(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(self.bn(self.conv(x))), 1), 1)

    gen = torch.Generator().manual_seed(0)
    model = Classifier(TinyBody(), nn.Linear(4, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
        model.body.bn.running_mean.copy_(torch.randn(4, generator=gen) * 0.1)
        model.body.bn.running_var.copy_(torch.rand(4, generator=gen) + 0.5)
    return model.double()


def _fl_data(sizes: Sequence[int] = (10, 13, 8, 16, 7, 11)):
    from torch.utils.data import TensorDataset

    gen = torch.Generator().manual_seed(1)

    def part(n: int) -> TensorDataset:
        return TensorDataset(torch.randn(n, 3, 6, 6, generator=gen, dtype=torch.float64),
                             torch.randint(0, 3, (n,), generator=gen))  # fmt: skip

    clients = [part(n) for n in sizes]
    return clients, part(40)


def _fl_outcome(res, state: Mapping[str, torch.Tensor]) -> Outcome:
    rows = [{"round": r.round, "stage": r.stage, "test_acc": r.test_acc, "test_loss": r.test_loss,
             "train_loss": r.train_loss, "clients": list(r.clients), "uplink_bytes": r.uplink_bytes,
             "downlink_bytes": r.downlink_bytes, "compute_f": r.compute_f, "frozen_drift": r.frozen_drift}
            for r in res.history]  # fmt: skip
    summary = {"reported_acc": res.reported_acc, "best_acc": res.best_acc, "best_round": res.best_round,
               "last_acc": res.last_acc}  # fmt: skip
    return Outcome(dict(state), rows, summary)


def fl_model_run(**cfg: Any) -> Callable[[], Outcome]:
    """``run_method`` on the tiny model: 6 clients, half sampled per round, 3 rounds, batch 4, lr 0.1."""

    def run() -> Outcome:
        from benchmark.fl.config import FLConfig
        from benchmark.fl.methods import run_method

        base = {"num_clients": 6, "participation": 0.5, "rounds": 3, "batch_size": 4, "client_lr": 0.1,
                "progress": False, "device": "cpu", "seed": 0}  # fmt: skip
        model = _fl_model()
        clients, test = _fl_data()
        res = run_method(FLConfig(**{**base, **cfg}), model=model, clients=clients, test=test)
        return _fl_outcome(res, model.state_dict())

    return run


def fl_features_run(**cfg: Any) -> Callable[[], Outcome]:
    """``run_method`` LP on cached features (float64, 8-d, 4 classes, 5 clients of unequal size), 4 rounds."""

    def run() -> Outcome:
        from benchmark.fl.config import FLConfig
        from benchmark.fl.lp_features import CachedFeatures
        from benchmark.fl.methods import run_method

        gen = torch.Generator().manual_seed(2)
        x = torch.randn(60, 8, generator=gen, dtype=torch.float64)
        y = torch.randint(0, 4, (60,), generator=gen)
        ends = np.cumsum([0, 9, 15, 6, 18, 12])
        parts = [np.arange(a, b) for a, b in itertools.pairwise(ends)]
        tx = torch.randn(30, 8, generator=gen, dtype=torch.float64)
        ty = torch.randint(0, 4, (30,), generator=gen)
        base = {"method": "lp", "num_clients": 5, "participation": 0.6, "rounds": 4, "batch_size": 4,
                "client_lr": 0.1, "progress": False, "device": "cpu", "seed": 0}  # fmt: skip
        res = run_method(FLConfig(**{**base, **cfg}), features=CachedFeatures(x, y, parts, tx, ty, 4))
        head = {k: torch.as_tensor(np.asarray(v)) for k, v in res.head_state.items()}
        return _fl_outcome(res, head)

    return run


# ------------------------------------------------------------------------------------------------ pfl
def _pfl_images(n: int, seed: int):
    from benchmark.federated.images import NORMALISATION, DeviceImages

    g = torch.Generator().manual_seed(seed)
    mean, std = NORMALISATION["cifar10"]
    images = torch.randint(0, 256, (n, 3, 32, 32), generator=g, dtype=torch.uint8)
    labels = torch.randint(0, 10, (n,), generator=g)
    return DeviceImages(
        images, labels, torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)
    )


def pfl_run(algorithm: str, **cfg: Any) -> Callable[[], Outcome]:
    """``PFLTrainer(...).run()``: 4convNet, 4 clients of 20/20/20/15 random images (10 test each), half
    sampled per round, 1 local epoch in batches of 10, 3 rounds (the lr drops x0.1 after rounds 1 and 2),
    float64, ``selection="last"`` (the selected state is then the final one)."""

    def run() -> Outcome:
        from benchmark.pfl.partition import ClientSplit
        from benchmark.pfl.trainer import PFLConfig, PFLTrainer

        sizes = (20, 20, 20, 15)
        ends = np.cumsum((0, *sizes))
        split = ClientSplit(tuple(np.arange(a, b) for a, b in itertools.pairwise(ends)),
                            tuple(np.arange(i * 10, (i + 1) * 10) for i in range(len(sizes))))  # fmt: skip
        base = {"dataset": "cifar10", "model": "4convnet", "algorithm": algorithm, "clients": 4,
                "participation": 0.5, "local_epochs": 1, "rounds": 3, "batch_size": 10, "lr": 0.05,
                "selection": "last", "dtype": "float64", "seed": 0}  # fmt: skip
        pcfg = PFLConfig(**{**base, **cfg})
        train, test = _pfl_images(sum(sizes), 0), _pfl_images(40, 1)
        res = PFLTrainer(pcfg, train, test, split, 10, progress=False).run()
        state = dict(res.selected_state)
        for i, s in res.selected_personal.items():
            state.update({f"personal/{i}/{k}": v for k, v in s.items()})
        rows = [{k: v for k, v in row.items() if k != "wall_s"} for row in res.history]
        summary = {"selected_round": res.selected_round, "client_accuracy": res.client_accuracy,
                   "other_selection_accuracy": res.other_selection_accuracy, **res.extra}  # fmt: skip
        return Outcome(state, rows, summary)

    return run


# ------------------------------------------------------------------------------------------------ zo
def _zo_model(classes: int = 3, dtype: str = "float64"):
    import transformers

    from benchmark.zo.text_model import TextClassifier

    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32)  # fmt: skip
    return TextClassifier(transformers.BertModel(cfg), 16, classes).to(getattr(torch, dtype)).eval()


def _zo_data(sizes: Sequence[int] = (12, 8, 10), classes: int = 3):
    from benchmark.zo.text_model import TextTensors

    g = torch.Generator().manual_seed(1)

    def part(n: int) -> TextTensors:
        lengths = torch.randint(3, 12, (n,), generator=g)
        ids = torch.randint(1, 50, (n, 12), generator=g)
        mask = (torch.arange(12)[None, :] < lengths[:, None]).long()
        return TextTensors(ids * mask, mask, torch.randint(0, classes, (n,), generator=g))

    return [part(n) for n in sizes], part(24)


def _zo_rows(records) -> list[dict[str, Any]]:
    return [asdict(r) for r in records]


def zo_run(method: str, dtype: str = "float64", **spec: Any) -> Callable[[], Outcome]:
    """``run_zo`` (MeZO / FedMeZO / DistMeZO) on the tiny BERT in ``dtype`` with the FedNCM head: 3 clients,
    4 rounds, lr 1e-2, eps 1e-3, 2 perturbations, evaluated every 2 rounds."""

    def run() -> Outcome:
        from benchmark.zo.run import ZORunSpec, run_zo
        from benchmark.zo.text_model import ncm_head_

        model = _zo_model(dtype=dtype)
        clients, test = _zo_data()
        ncm_head_(model, clients, scale=1.0)
        base = {"dataset": "golden_random", "encoder": "tiny_bert", "method": method, "clients": 3,
                "alpha": 1.0, "k_shot": None, "rounds": 4, "lr": 1e-2, "seed": 0,
                "eval_every": 2}  # fmt: skip
        result, _ = run_zo(ZORunSpec(**{**base, **spec}), model, clients, test, checkpoint=None,
                           checkpoint_every=1, progress=None)  # fmt: skip
        t = result.traffic
        summary = {"initial_accuracy": result.initial_accuracy, "final_accuracy": result.final_accuracy,
                   "uplink_bytes": t.uplink_bytes, "downlink_bytes": t.downlink_bytes}  # fmt: skip
        return Outcome(model.state_dict(), _zo_rows(result.rounds), summary)

    return run


def slora_run(**cfg: Any) -> Callable[[], Outcome]:
    """``run_slora`` on the tiny BERT (float64, 2 classes, FedNCM head): 3 clients, 4 rounds (2 of stage
    1), rank 4, SGD lr 0.05, batch 4, evaluated every 2 rounds. ``run_slora`` trains a copy of the model:
    the final state is the global model its ``progress`` hook shows after the last round (LoRA factors
    included)."""

    def run() -> Outcome:
        from benchmark.zo.slora import SLoRAConfig, run_slora
        from benchmark.zo.text_model import ncm_head_

        model = _zo_model(classes=2)
        clients, test = _zo_data(classes=2)
        ncm_head_(model, clients, scale=1.0)
        base = {"rounds": 4, "priming_fraction": 0.5, "density": 0.1, "rank": 4, "lr": 0.05, "batch_size": 4,
                "optimizer": "sgd", "eval_every": 2, "seed": 0}  # fmt: skip
        final: dict[str, torch.Tensor] = {}

        def keep(event) -> None:
            if event.kind == "round":
                final.clear()
                final.update({k: v.detach().clone() for k, v in event.model.state_dict().items()})

        res = run_slora(model, clients, test, SLoRAConfig(**{**base, **cfg}), progress=keep)
        summary = {"final_accuracy": res.final_accuracy, "uplink_bytes": res.uplink_bytes,
                   "downlink_bytes": res.downlink_bytes, "arithmetic_bytes": res.arithmetic_bytes,
                   "trainable_params_stage2": res.trainable_params_stage2}  # fmt: skip
        return Outcome(final, _zo_rows(res.history), summary)

    return run


# ------------------------------------------------------------------------------------------------ registry
#: Runs in float32 (the dtype of real runs): on another machine their floats are not compared at all (a
#: float32 finite difference or BatchNorm backward moves by more than :data:`TOLERANCE` under other kernels),
#: only their integers and strings; on the recording machine they are exact like the rest.
FLOAT32_RUNS = frozenset({"pfl_fedbabu_float32", "zo_fedmezo_float32"})

#: name -> the run (a zero-argument callable). Adding a run: one line here, then ``record --only NAME``.
RUNS: dict[str, Callable[[], Outcome]] = {
    # fl: FT under FedAvg / FedProx / FedAdam, the vectorised executor, LP then FT, LP on cached features
    "fl_ft_fedavg": fl_model_run(method="ft"),
    "fl_ft_fedavg_eval2_aggbn": fl_model_run(method="ft", eval_every=2, bn_stats="aggregate", rounds=4),
    "fl_ft_fedprox": fl_model_run(method="ft", prox_mu=0.5),
    "fl_ft_fedadam": fl_model_run(method="ft", server_opt="fedadam", server_lr=0.05),
    "fl_ft_fedavg_vectorised": fl_model_run(method="ft", client_exec="vectorised"),
    "fl_lp_ft_fedavg": fl_model_run(method="lp_ft", lp_stage_rounds=2, rounds=2),
    "fl_lp_features_fedavg": fl_features_run(),
    "fl_lp_features_fedadam": fl_features_run(server_opt="fedadam", server_lr=0.05),
    # pfl: the seven algorithms of fedbabu's tables, the loop and (where supported) the lock-step executor
    "pfl_fedbabu": pfl_run("fedbabu"),
    "pfl_fedbabu_float32": pfl_run("fedbabu", dtype="float32"),
    "pfl_fedavg": pfl_run("fedavg"),
    "pfl_fedrep": pfl_run("fedrep"),
    "pfl_ditto": pfl_run("ditto"),
    "pfl_per_fedavg": pfl_run("per_fedavg"),
    "pfl_lg_fedavg": pfl_run("lg_fedavg"),
    "pfl_fedper": pfl_run("fedper"),
    "pfl_fedbabu_vectorised": pfl_run("fedbabu", client_exec="vectorised"),
    "pfl_fedavg_vectorised": pfl_run("fedavg", client_exec="vectorised"),
    "pfl_lg_fedavg_vectorised": pfl_run("lg_fedavg", client_exec="vectorised"),
    "pfl_fedper_vectorised": pfl_run("fedper", client_exec="vectorised"),
    # zo: MeZO, FedMeZO, DistMeZO, SLoRA
    "zo_mezo": zo_run("mezo"),
    "zo_fedmezo": zo_run("fedmezo"),
    "zo_fedmezo_float32": zo_run("fedmezo", dtype="float32"),
    "zo_distmezo": zo_run("distmezo", local_steps=2),
    "zo_slora": slora_run(),
}


# ------------------------------------------------------------------------------------------------ running
def _cpu_ids() -> str:
    """``vendor_id``, ``cpu family``, ``model``, ``stepping`` of the first CPU in /proc/cpuinfo (the model
    name alone can be as coarse as "AMD EPYC" on a virtual machine); empty where there is no /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    info = dict(line.split(":", 1) for line in text.split("\n\n")[0].splitlines() if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    return ", ".join(f"{k} {info[k]}" for k in ("vendor_id", "cpu family", "model", "stepping") if k in info)


def fingerprint() -> dict[str, Any]:
    """The machine facts that decide whether two runs must be bit-identical: the CPU (model, ids, vector
    extensions, the kernels torch dispatches to), Python, torch, numpy and the thread count."""
    from benchmark.provenance import cpu_description

    return {"cpu": cpu_description(), "cpu_ids": _cpu_ids(), "machine": platform.machine(),
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "torch_threads": 1}  # fmt: skip


@contextlib.contextmanager
def deterministic() -> Iterator[None]:
    """One torch thread, deterministic algorithms, every global RNG seeded; restored afterwards."""
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        torch.manual_seed(0)
        np.random.seed(0)
        random.seed(0)
        yield
    finally:
        torch.use_deterministic_algorithms(det)
        torch.set_num_threads(threads)


def run_one(name: str) -> tuple[dict[str, Any], float]:
    """The record of run ``name`` and its wall seconds."""
    t0 = time.perf_counter()
    with deterministic():
        rec = describe(RUNS[name]())
    return rec, time.perf_counter() - t0


def _floats_close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=TOLERANCE["rel"], abs_tol=TOLERANCE["abs"])


def first_difference(want: Any, got: Any, mode: str, path: str = "") -> str | None:
    """The first path where ``got`` differs from ``want`` (``None``: equal), with both values.

    ``mode``: ``exact`` -- every value identical, type included (NaN equals NaN); ``tolerant`` -- ``*sha256``
    skipped, floats within :data:`TOLERANCE`, the rest identical; ``no_floats`` -- as ``tolerant`` but floats
    are not compared (float32 runs on another machine)."""
    if isinstance(want, dict) and isinstance(got, dict):
        if want.keys() != got.keys():
            return f"{path or '.'}: keys {sorted(want)} != {sorted(got)}"
        for k in sorted(want, key=lambda k: k.endswith("sha256")):  # digests last: a number says more
            if mode != "exact" and k.endswith("sha256"):
                continue
            d = first_difference(want[k], got[k], mode, f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(want, list) and isinstance(got, list):
        if len(want) != len(got):
            return f"{path}: length {len(want)} != {len(got)}"
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            d = first_difference(a, b, mode, f"{path}[{i}]")
            if d:
                return d
        return None
    if type(want) is not type(got):
        return f"{path}: recorded {want!r} ({type(want).__name__}), now {got!r} ({type(got).__name__})"
    if isinstance(want, float):
        if mode == "no_floats":
            return None
        if mode == "tolerant":
            close = _floats_close(want, got)
            return None if close else f"{path}: recorded {want!r}, now {got!r} (beyond tolerance)"
        if want == got or (math.isnan(want) and math.isnan(got)):
            return None
        return f"{path}: recorded {want!r} ({want.hex()}), now {got!r} ({got.hex()})"
    return None if want == got else f"{path}: recorded {want!r}, now {got!r}"


def _roundtrip(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` as it reads back from the file (tuples become lists, numbers their JSON form)."""
    return json.loads(json.dumps(rec))


def record(names: Sequence[str], path: Path) -> int:
    """Run ``names`` and write their records into ``path`` (other runs already there are kept only when
    recorded on this same machine fingerprint)."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    fp = fingerprint()
    runs = old.get("runs", {}) if old.get("fingerprint") == fp else {}
    total = 0.0
    for name in names:
        rec, secs = run_one(name)
        total += secs
        runs[name] = _roundtrip(rec)
        print(f"recorded {name}: {rec['rounds']} rounds, {secs:.1f} s, state {rec['state_sha256'][:12]}")
    doc = {"format": FORMAT, "issue": 25, "fingerprint": fp, "tolerance_other_machine": TOLERANCE,
           "float32_runs_floats_not_compared_on_other_machines": sorted(FLOAT32_RUNS),
           "runs": {k: runs[k] for k in sorted(runs)}}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=False, allow_nan=True) + "\n")
    tmp.replace(path)
    print(f"{len(names)} runs in {total:.1f} s -> {path}")
    return 0


def check(names: Sequence[str], path: Path) -> int:
    """Run ``names`` and compare with ``path`` (module docstring); 0 when all agree, 1 otherwise."""
    if not path.is_file():
        print(f"no golden file {path}: run `python -m tools.golden_runs record` on the reference code")
        return 1
    doc = json.loads(path.read_text())
    exact = doc["fingerprint"] == fingerprint()
    if exact:
        print("same machine fingerprint: every value must be identical, state sha256 included")
    else:
        print(f"another machine (recorded on {doc['fingerprint']}, this is {fingerprint()}): state sha256 "
              f"NOT compared, floats within rel {TOLERANCE['rel']:g} / abs {TOLERANCE['abs']:g}, floats of "
              f"the float32 runs ({', '.join(sorted(FLOAT32_RUNS))}) not compared")  # fmt: skip
    failed, total = [], 0.0
    for name in names:
        if name not in doc["runs"]:
            print(f"FAIL {name}: not in {path} (record it)")
            failed.append(name)
            continue
        rec, secs = run_one(name)
        total += secs
        mode = "exact" if exact else "no_floats" if name in FLOAT32_RUNS else "tolerant"
        diff = first_difference(doc["runs"][name], _roundtrip(rec), mode)
        print(f"{'FAIL' if diff else 'ok  '} {name} ({secs:.1f} s){': ' + diff if diff else ''}")
        if diff:
            failed.append(name)
    print(f"{len(names) - len(failed)}/{len(names)} runs agree ({total:.1f} s)")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.golden_runs", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("record", "check", "list"))
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these runs only (default: all)")
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE, help=f"golden file (default {DEFAULT_FILE})")
    args = ap.parse_args(argv)
    if args.action == "list":
        print("\n".join(RUNS))
        return 0
    names = args.only or list(RUNS)
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        print(f"unknown run(s) {unknown}; known: {', '.join(RUNS)}")
        return 2
    return record(names, args.file) if args.action == "record" else check(names, args.file)


if __name__ == "__main__":
    sys.exit(main())
