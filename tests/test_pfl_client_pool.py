"""A round's clients in forked CPU processes (issue 27; ``PFLConfig.client_procs``,
:mod:`benchmark.pfl.client_pool`): bit for bit the per-client loop at one thread for every local procedure and
every kind of personal state (none, a personal head or body, Ditto's personal model), hence execution only: in
the record when above 1, never in the checkpoint identity (a run checkpointed with two processes resumes with one
and ends where an uninterrupted run ends); the workflow key reaches the trainer and the Snakemake job asks for
that many threads; bad values get one error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from test_pfl_channels_last import _images  # the same synthetic CIFAR-10 images

from benchmark.errors import ConfigError
from benchmark.federated.loop import StopRequested, clear_stop_request, request_stop
from benchmark.harvest_park import progress_of
from benchmark.pfl import client_pool
from benchmark.pfl.partition import ClientSplit
from benchmark.pfl.trainer import PFLConfig, PFLResult, PFLTrainer
from benchmark.runners.pfl import PFLTrainJob, estimate, pfl_job_seconds

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CLIENTS = 4
ROOT = Path(__file__).resolve().parents[1]


def _trainer(algorithm: str, procs: int, rounds: int = 3) -> PFLTrainer:
    split = ClientSplit(tuple(np.arange(i * 20, (i + 1) * 20) for i in range(CLIENTS)),
                        tuple(np.arange(i * 10, (i + 1) * 10) for i in range(CLIENTS)))  # fmt: skip
    cfg = PFLConfig(dataset="cifar10", model="4convnet", algorithm=algorithm, clients=CLIENTS, participation=0.5,
                    local_epochs=1, rounds=rounds, batch_size=10, lr=0.05, selection="last", eval_every=rounds,
                    client_procs=procs)  # fmt: skip
    return PFLTrainer(cfg, _images(20 * CLIENTS, 0), _images(10 * CLIENTS, 1), split, 10, progress=False)


def _assert_same_run(a: PFLResult, b: PFLResult, ta: PFLTrainer, tb: PFLTrainer) -> None:
    assert a.selected_state.keys() == b.selected_state.keys()
    for k in a.selected_state:
        assert torch.equal(a.selected_state[k], b.selected_state[k]), k
    assert ta.personal.keys() == tb.personal.keys()
    for i in ta.personal:
        assert ta.personal[i].keys() == tb.personal[i].keys()
        for k in ta.personal[i]:
            assert torch.equal(ta.personal[i][k], tb.personal[i][k]), (i, k)
    assert [h["train_loss"] for h in a.history] == [h["train_loss"] for h in b.history]
    np.testing.assert_array_equal(a.client_accuracy, b.client_accuracy)


# fedavg: no personal entries; fedbabu and fedper: a personal head; lg_fedavg: personal bodies; fedrep, ditto,
# per_fedavg: the three procedures (Ditto keeps a personal model per client)
@pytest.mark.parametrize("algorithm", ["fedavg", "fedbabu", "fedper", "lg_fedavg", "fedrep", "ditto", "per_fedavg"])
def test_two_processes_train_the_loops_model_bit_for_bit(algorithm: str) -> None:
    loop, pooled = _trainer(algorithm, 1), _trainer(algorithm, 2)
    a, b = loop.run(), pooled.run()
    if algorithm == "ditto":
        assert len(pooled.personal) >= 2  # the personal models came back from the workers
    _assert_same_run(a, b, loop, pooled)
    assert pooled.pool is None and client_pool._FORKED is None  # closed after the run


def test_the_option_is_in_the_record_not_in_the_checkpoint_identity(tmp_path) -> None:
    """Stopped after its first round with two processes (as a harvest's budget stops it), the run resumes with one
    and ends bit for bit where the uninterrupted loop ends; the pool is closed by the stop."""
    assert "client_procs" not in PFLConfig().to_dict()  # the records made before the option stay what they were
    assert PFLConfig(client_procs=2).to_dict()["client_procs"] == 2
    assert PFLConfig(client_procs=2).identity() == PFLConfig().identity()
    ckpt = tmp_path / "run.pt"
    first = _trainer("ditto", 2)
    round_of = first.train_round

    def stop_after_first(r: int, clients: np.ndarray, lr: float):  # type: ignore[no-untyped-def]
        stats = round_of(r, clients, lr)
        request_stop()
        return stats

    first.train_round = stop_after_first  # type: ignore[method-assign]
    try:
        with pytest.raises(StopRequested):
            first.run(checkpoint=ckpt, checkpoint_every=1)
    finally:
        clear_stop_request()
    assert first.pool is None and client_pool._FORKED is None
    assert progress_of(ckpt) == (1, 3)  # stopped after its first round
    resumed, whole = _trainer("ditto", 1), _trainer("ditto", 1)
    a = resumed.run(checkpoint=ckpt, checkpoint_every=1)
    b = whole.run()
    _assert_same_run(a, b, resumed, whole)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_client_procs_must_be_a_whole_number_of_processes(bad: object) -> None:
    with pytest.raises(ConfigError, match="client_procs"):
        PFLConfig(client_procs=bad)  # type: ignore[arg-type]


def test_processes_run_the_loop_only() -> None:
    with pytest.raises(ConfigError, match="client_exec 'loop'"):
        PFLConfig(client_procs=2, client_exec="vectorised")


def _job(algorithm: str = "ditto") -> PFLTrainJob:
    return PFLTrainJob(dataset="cifar10", model="4convnet", bn="batch", scheme="shards", scheme_param="2",
                       clients=100, server_fraction="0", algorithm=algorithm, participation="0.1", local_epochs=10,
                       rounds=32, momentum="0.9", head_lr="1", head_init="default", prox_mu="default",
                       selection="last", seed=0)  # fmt: skip


def test_the_workflow_key_reaches_the_trainer_and_the_jobs_threads() -> None:
    job = _job()
    assert job.pfl_config({}).client_procs == 1 and job.threads({}) == 1
    cfg = job.pfl_config({"pfl_client_procs": 2, "train_exec": "auto", "device": "cpu"})
    assert cfg.client_procs == 2 and cfg.client_exec == "loop"
    assert job.threads({"pfl_client_procs": 2}) == 2


def test_the_estimate_shares_the_training_among_the_processes_but_not_the_cpu_hours() -> None:
    job = _job()
    one, two = (pfl_job_seconds(job, "cpu", {"pfl_client_procs": p}) for p in (1, 2))
    assert one is not None and two is not None and 0.5 * one < two < one
    assert estimate((job,), 1, {"pfl_client_procs": 2}) == estimate((job,), 1, {})


def test_the_snakemake_job_asks_for_a_thread_per_process(tmp_path, real_data_root) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "4", "-s", str(ROOT / "workflow" / "Snakefile"),
         "--directory", str(tmp_path), "fedbabu_table12", "--config", "cpu_training=true", "use_records=false",
         "pfl_client_procs=2", f"data_root={real_data_root}"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "FLB_OFFLINE": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    threads: dict[str, set[str]] = {}
    rule = None
    for line in proc.stdout.splitlines():
        if line.startswith("rule "):
            rule = line.removeprefix("rule ").rstrip(":")
            threads.setdefault(rule, set()).add("1")  # Snakemake prints a job's threads only above 1
        elif rule and line.strip().startswith("threads: "):
            threads[rule] = (threads[rule] - {"1"}) | {line.split(": ", 1)[1]}
    assert threads.get("job_pfl_train") == {"2"}, threads
    assert threads.get("job_pfl_eval") == {"1"}, threads


def test_the_pool_closes_under_a_harvest_workers_sigterm_handler() -> None:
    """A harvest worker catches SIGTERM to end its round (``benchmark.harvest._on_sigterm``) and the fork copies
    that handler: the pool's workers must still end when the run closes the pool (the workers reset SIGTERM to
    its default action; a pool whose workers ignored SIGTERM was seen hanging in its terminate here)."""
    script = (
        "import signal, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "signal.signal(signal.SIGTERM, lambda *a: None)\n"
        "import torch; torch.set_num_threads(1)\n"
        "import test_pfl_client_pool as t\n"
        "t._trainer('ditto', 2, rounds=1).run()\n"
        "print('closed')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT / "tests")], capture_output=True, text=True,
                          timeout=180, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0 and "closed" in proc.stdout, proc.stderr[-2000:]
