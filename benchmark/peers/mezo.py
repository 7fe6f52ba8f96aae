"""``flb peer mezo``: MeZO's step (princeton-nlp/MeZO) beside this suite's, and FedMeZO with one client beside
MeZO's centralised steps (issue 26, point 1).

Their side: the released trainer's own step methods on a small model (:mod:`benchmark.peers.drivers.
mezo_driver`, a subprocess: their code seeds the global torch and numpy generators). Our side, in this
process, on the same model, examples and seeds (their ``np.random.randint`` draws, read back):

* ``ours: mezo_step``: :mod:`benchmark.zo.mezo`'s projected gradients and update, one batch, weight 1;
* ``ours: fedmezo``: the FedMeZO trainer (:mod:`benchmark.zo.fedmezo`) with **one client** holding every
  example, the round seeds given (:attr:`~benchmark.zo.fedmezo.FedMeZOConfig.round_seeds`), size weighting.

Compared per step and seed under the ``identical`` rule with ``atol = 0`` (bit for bit): the projected
gradient (the per-round values, ``metric = projected_gradient``), the loss pair (``extra: loss1_s<i>``,
``loss2_s<i>``), the step seeds, and the weights before and after (``extra: params_sha256_52``: the first 52
bits of the parameters' sha256, an integer a float holds exactly). ``final`` is the last step's loss1 (the
training loss MeZO logs). Configurations: ``tiny`` (a 2-layer embedding model, 32 token sequences, 5 steps),
``tiny-fedmezo``, ``tiny-flb`` (this suite's default z stream: expected to DISAGREE, it draws other z),
``minilm`` (the substitute all-MiniLM-L6-v2 with its FedNCM head on SST-2's k-shot 16 training set, 32
sentences, 3 steps, FedMeZO with one client), ``minilm-wd`` (weight decay 0.1: MeZO's exempt-name rule).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from benchmark.errors import ConfigError
from benchmark.peers.compare import AgreementRule, Difference, PeerComparison, SideRun
from benchmark.peers.registry import PeerFamily, PeerRequest, register
from benchmark.zo.mezo import (
    ZOConfig,
    apply_update_,
    parameters_sha256,
    projected_gradients,
    trainable_parameters,
)
from benchmark.zo.text_model import TextClassifier, TextTensors, mean_loss

DRIVER = Path(__file__).parent / "drivers" / "mezo_driver.py"
OFFICIAL_URL = "https://github.com/princeton-nlp/MeZO"

_TINY = {"case": {"kind": "toy", "examples": 32, "length": 6, "vocab": 50, "hidden": 8, "seed": 0},
         "steps": 5, "lr": 1e-3, "eps": 1e-3, "weight_decay": 0.0}  # fmt: skip
_MINILM = {"case": {"kind": "minilm-sst2", "k_shot": 16, "seed": 0}, "steps": 3, "lr": 1e-3, "eps": 1e-3,
           "weight_decay": 0.0}  # fmt: skip
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny": {**_TINY, "ours": "mezo_step", "z_stream": "mezo"},
    "tiny-fedmezo": {**_TINY, "ours": "fedmezo", "z_stream": "mezo"},
    "tiny-flb": {**_TINY, "ours": "mezo_step", "z_stream": "flb"},
    "minilm": {**_MINILM, "ours": "fedmezo", "z_stream": "mezo"},
    "minilm-wd": {**_MINILM, "ours": "mezo_step", "z_stream": "mezo", "weight_decay": 0.1},
}
OURS = ("mezo_step", "fedmezo")


class _ToyEncoder(nn.Module):
    """Embedding then one tanh layer: a tiny stand-in encoder whose output has ``last_hidden_state``."""

    def __init__(self, vocab: int, hidden: int) -> None:
        super().__init__()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.dense = nn.Linear(hidden, hidden)
        self.LayerNorm = nn.LayerNorm(hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        return (self.LayerNorm(torch.tanh(self.dense(self.embeddings(input_ids)))),)


def build_case(
    case: Mapping[str, Any],
) -> tuple[nn.Module, TextTensors, Callable[[nn.Module, TextTensors], float]]:
    """The model, the one batch and the loss of a configuration's case (both sides build it from this)."""
    kind = case.get("kind")
    if kind == "toy":
        gen = torch.Generator().manual_seed(int(case["seed"]))
        n, length, vocab, hidden = (int(case[k]) for k in ("examples", "length", "vocab", "hidden"))
        ids = torch.randint(1, vocab, (n, length), generator=gen)
        mask = torch.ones(n, length, dtype=torch.long)
        labels = torch.randint(0, 2, (n,), generator=gen)
        torch.manual_seed(int(case["seed"]))
        model = TextClassifier(_ToyEncoder(vocab, hidden), hidden, 2, "mean", normalize=False).eval()
        return model, TextTensors(ids, mask, labels), mean_loss
    if kind == "minilm-sst2":
        from benchmark.zo.run import ZORunSpec, build_model  # local: heavy import (the encoder)

        spec = ZORunSpec(dataset="sst2", encoder="all-minilm-l6-v2", method="fedmezo", clients=1, alpha=100.0,
                         k_shot=int(case["k_shot"]), rounds=0, lr=0.0, seed=int(case["seed"]),
                         test_limit=1)  # fmt: skip
        _enc, _task, model, clients, _test = build_model(spec, "cpu", case.get("data_root"))
        return model, clients[0], mean_loss
    raise ConfigError(f"mezo peer case {kind!r}", "use kind 'toy' or 'minilm-sst2'")


def _sha52(sha: str) -> float:
    return float(int(sha[:13], 16))


def ours_steps(
    model: nn.Module, batch: TextTensors, seeds: list[int], config: Mapping[str, Any]
) -> dict[str, Any]:
    """This suite's side on ``model`` (in place): per step the projected gradient and loss pair, and the weights'
    sha256 before and after (``config["ours"]``: the MeZO step or FedMeZO with one client)."""
    zo = ZOConfig(lr=float(config["lr"]), eps=float(config["eps"]), num_z=1,
                  weight_decay=float(config.get("weight_decay", 0.0)),
                  restore="inplace" if config["z_stream"] == "mezo" else "copy", z_stream=config["z_stream"])  # fmt: skip
    before = parameters_sha256(model)
    rows = []
    start = time.time()
    if config["ours"] == "mezo_step":
        params = trainable_parameters(model)
        for step, seed in enumerate(seeds, start=1):
            proj = projected_gradients(model, [batch], seed, zo, params)
            g = float(proj.grads[0, 0])
            apply_update_(params, seed, [g], zo)
            rows.append({"step": step, "seed": seed, "loss1": float(proj.plus[0, 0]),
                         "loss2": float(proj.minus[0, 0]), "projected_grad": g})  # fmt: skip
    elif config["ours"] == "fedmezo":
        from benchmark.zo.fedmezo import FedMeZOConfig, run_fedmezo

        fed = FedMeZOConfig(zo, rounds=len(seeds), seed=0, round_seeds=tuple(seeds))
        result = run_fedmezo(model, [batch], fed, None)
        for step, (entry, row) in enumerate(zip(result.log, result.rounds, strict=True), start=1):
            rows.append({"step": step, "seed": entry.seed, "loss1": row.train_loss,
                         "projected_grad": float(entry.average[0])})  # fmt: skip
    else:
        raise ConfigError(f"mezo peer 'ours' {config['ours']!r}", f"use one of {OURS}")
    return {"steps": rows, "params_sha256_before": before, "params_sha256": parameters_sha256(model),
            "wall_s": time.time() - start}  # fmt: skip


def side_run(side: str, seed: int, result: Mapping[str, Any], command: str = "") -> SideRun:
    """A :class:`SideRun` of one side's steps (module docstring: what is compared)."""
    steps = result["steps"]
    extra = {"params_sha256_52_before": _sha52(result["params_sha256_before"]),
             "params_sha256_52": _sha52(result["params_sha256"])}  # fmt: skip
    for row in steps:
        extra[f"seed_s{row['step']}"] = float(row["seed"])
        extra[f"loss1_s{row['step']}"] = float(row["loss1"])
        if "loss2" in row:
            extra[f"loss2_s{row['step']}"] = float(row["loss2"])
    return SideRun(side=side, seed=seed, rounds=tuple(r["step"] for r in steps),
                   accuracy=tuple(float(r["projected_grad"]) for r in steps), final=float(steps[-1]["loss1"]),
                   extra=extra, wall_s=float(result.get("wall_s", 0.0)), command=command,
                   metric="projected_gradient",
                   notes=(f"params sha256 {result['params_sha256'][:16]}",))  # fmt: skip


def their_side(request: PeerRequest, config: Mapping[str, Any], seed: int) -> tuple[dict[str, Any], str]:
    """Run the driver on the released code (a subprocess) for one seed; its result and the command."""
    work = Path(request.workdir)
    work.mkdir(parents=True, exist_ok=True)
    spec_path, out = work / f"spec-seed{seed}.json", work / f"theirs-seed{seed}.json"
    spec = {"checkout": str(Path(request.official_repo).resolve()), "case": dict(config["case"]),
            "steps": config["steps"], "lr": config["lr"], "eps": config["eps"],
            "weight_decay": config.get("weight_decay", 0.0), "seed": seed, "out": str(out),
            "threads": request.threads}  # fmt: skip
    spec_path.write_text(json.dumps(spec, indent=1))
    root = Path(__file__).resolve().parents[2]
    cmd = [request.python, str(DRIVER), str(spec_path)]
    env = {**_env(), "PYTHONPATH": str(root), "OMP_NUM_THREADS": str(request.threads)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    (work / f"theirs-seed{seed}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise ConfigError(f"the MeZO driver failed (exit {done.returncode}): {done.stderr.strip()[-300:]}",
                          f"see {work}/theirs-seed{seed}.log")  # fmt: skip
    return json.loads(out.read_text()), " ".join(cmd)


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


DIFFERENCES = (
    Difference("direction z", "torch.manual_seed(step seed), then torch.normal(0, 1) per parameter on the global "
               "generator", "default (z_stream=flb): a dedicated generator per (seed, direction) seeded by sha256, "
               "torch.randn per parameter; z_stream=mezo draws theirs (the same numbers, without touching the "
               "global generator)", "other z for the same seed: other trajectories, same distribution"),
    Difference("perturbation and update arithmetic", "θ + (f·z)·ε; θ − lr·(g·z + wd·θ)",
               "default: in-place add_ with a scalar (rounds differently in about 0.1 % of entries); "
               "z_stream=mezo: their expression order", "ulp-level differences per step"),
    Difference("restore after perturbing", "in place: +εz, −2εz, +εz (not exact in floating point)",
               "default restore=copy (exact); restore=inplace is theirs (the mezo configurations use it)",
               "about half the entries one ulp off per step (docs/fedmezo.md)"),
    Difference("step seed", "np.random.randint(1e9) from numpy's global generator, per step",
               "FedMeZO: uint32 round seeds from the run seed's stream; here given theirs (round_seeds)", ""),
    Difference("loss", "the Hugging Face model's loss (float32 mean over the batch)",
               "mean cross-entropy accumulated in float64 (benchmark.zo.text_model.mean_loss); both sides "
               "use it here (the stand-in's compute_loss)", "the comparison checks the step, not the loss code"),
    Difference("aggregation", "one batch per step, no gradient accumulation (asserted)",
               "FedMeZO: clients' projected gradients averaged by size (with one client: the client's own)",
               "one client of n = 32 examples: n·g/n == g exactly (n a power of two)"),
)  # fmt: skip


def run(request: PeerRequest) -> PeerComparison:
    """Both sides for every seed of ``request`` (module docstring)."""
    from benchmark.peers.run import (
        official_commit,  # local: run imports the registry that imports this module
    )

    config = CONFIGS[request.config_name]
    torch.set_num_threads(request.threads)
    ours, theirs = [], []
    for seed in request.seeds:
        got, command = their_side(request, config, seed)
        theirs.append(side_run("theirs", seed, got, command))
        model, batch, _loss = build_case(config["case"])
        seeds = [int(r["seed"]) for r in got["steps"]]
        mine = ours_steps(model, batch, seeds, config)
        ours.append(side_run("ours", seed, mine, f"benchmark.peers.mezo.ours_steps ({config['ours']})"))
    notes = [
        "their side: the four step methods of large_models/trainer.py (OurTrainer) read from the checkout at run "
        "time and bound to a stand-in trainer (benchmark/peers/drivers/mezo_driver.py); transformers 4.28 is not "
        "needed",
        f"ours: {config['ours']} with z_stream={config['z_stream']}, num_z=1, "
        f"restore={'inplace' if config['z_stream'] == 'mezo' else 'copy'}",
    ]
    return PeerComparison(
        family="mezo", config_name=request.config_name, config=dict(config), seeds=tuple(request.seeds),
        official_repo=OFFICIAL_URL, official_commit=official_commit(Path(request.official_repo)), ours=tuple(ours), theirs=tuple(theirs),
        rule=AgreementRule("identical", atol=0.0), differences=DIFFERENCES, notes=tuple(notes),
    )  # fmt: skip


FAMILY = register(PeerFamily(
    name="mezo", paper="bernier2024", official_url=OFFICIAL_URL, configs=CONFIGS, run=run,
    install=("No environment of its own: the driver reads large_models/trainer.py from a checkout "
             "(git clone https://github.com/princeton-nlp/MeZO) and compiles only the four MeZO step methods of "
             "its trainer class (zo_perturb_parameters, zo_forward, zo_step, zo_update), which need torch and "
             "numpy; the Hugging Face Trainer 4.28 the class subclasses is never imported."),
    default_seeds=(0, 1),
))  # fmt: skip
