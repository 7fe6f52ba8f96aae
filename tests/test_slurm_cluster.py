"""The SLURM workflow profile on a real (single-node) SLURM: a training job cancelled after its first checkpoint
ends its round in progress and checkpoints there, is resubmitted by the profile's ``retries`` and resumes to the
numbers of an uninterrupted run (issue 28).

``tools/slurm_single_node.py`` starts munged, slurmctld and slurmd from Debian's packages under a temporary
folder (one node: this host; one partition, ``debug``). Snakemake then runs one real pfl training (fedbabu's
FedBABU on CIFAR-10, 4convNet, 6 rounds, a checkpoint every 3: about 15 s of training on one CPU core) as a
SLURM job through ``workflow/profiles/slurm``. Once the job's first checkpoint is on disk (round 3 of 6: one every
3 rounds) the test holds the job's training process (SIGSTOP) and cancels the job (``scancel``, as SLURM kills a
job at its time limit: SIGTERM, then SIGKILL ``KillWait`` later); once the SIGTERM is pending it lets the process go
on (SIGCONT). Without the hold, on a machine whose rounds take a second, the job reached its last round before the
signal came and completed (CI, 2026-12-06: the target existed after the cancel). ``flb job`` lets the round in progress end on the SIGTERM and writes its checkpoint there,
although none is due (:func:`benchmark.cli._job_on_sigterm`; a kill alone would leave round 3); the profile's
``retries`` submits it again, the new SLURM job resumes from that checkpoint, and the build completes. Its record (per-client accuracies,
selected round, history but its wall times) and its model weights equal those of the same job run without
SLURM and without interruption; the rows of the rounds before the kill are the checkpoint's own (resumed, not
restarted).

The profile is used as a user would on a cluster like this one, through a copy with only what differs here:

* partitions: ``debug`` (this cluster's only one) instead of ``main`` / ``gpu``; no GPU request (no GPU node);
  memory and CPUs this node has (the profile asks for 16-32 GB and 4-8 CPUs);
* no accounting database (no slurmdbd): ``sacct`` fails, so the plug-in polls with ``squeue``
  (``slurm-status-command: squeue``), and no account is given (it submits without one); see docs/cluster.md,
  "Clusters without accounting";
* status checks every few seconds instead of 40 s (``slurm-init-seconds-before-status-checks``), to keep the test
  short.

Everything else (``retries``, ``rerun-incomplete``, ``latency-wait``, the profile's config file) is the profile's.
``--config device=cpu cpu_training=true`` replaces the profile's ``device: cuda`` (the node has no GPU);
``pfl_measure_exec=false`` keeps the per-client loop (a timing-based choice could differ between the runs);
``OMP_NUM_THREADS=1`` in both runs, so that both compute with the same thread count.

Skipped, with the reason, where SLURM or munge is not installed, where this process is not root (slurmd must be),
where the cluster does not start, or without the slurm executor plug-in (``pip install -e '.[cluster]'``). Opt
in with ``FLB_SLURM_TEST=1``: it starts daemons as root and links /etc/slurm/slurm.conf (tools/slurm_single_node.py);
``FLB_REQUIRE_SLURM=1`` (the SLURM stage of ``.ci/run``) turns every such skip into a failure;
about 2.5 min on a 2-core machine (a minute of it the plug-in's growing status-check intervals).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "workflow" / "profiles" / "slurm"
sys.path.insert(0, str(ROOT))
from tools.slurm_single_node import PARTITION, SingleNodeSlurm, SlurmUnavailable, missing_reason  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.realdata]

TARGET = ("results/runs/pfl/cifar10/4convnet-bnbatch/shards-2-K100-p0/fedbabu/"
          "f0.02-tau1-R6-m0.9-hl1-default-mudefault/last/seed0.json")  # fmt: skip
CKPT = "results/checkpoints/" + TARGET.removeprefix("results/").removesuffix(".json") + ".pt"
CONFIG = ["device=cpu", "cpu_training=true", "checkpoint_every=3", "pfl_measure_exec=false"]
ROUNDS, EVERY = 6, 3


def _unavailable(reason: str) -> None:
    """Skip with ``reason``; a failure where a stage requires the cluster (``FLB_REQUIRE_SLURM=1``, .ci/run)."""
    if os.environ.get("FLB_REQUIRE_SLURM") == "1":
        pytest.fail(f"FLB_REQUIRE_SLURM=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.environ.get("FLB_SLURM_TEST") != "1":
        _unavailable("starts a SLURM cluster as root on this machine: opt in with FLB_SLURM_TEST=1")
    if reason := missing_reason():
        _unavailable(reason)
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ModuleNotFoundError:
        _unavailable("the slurm executor plug-in is not installed: pip install -e '.[cluster]'")
    c = SingleNodeSlurm(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
    except SlurmUnavailable as err:
        _unavailable(f"single-node SLURM does not start here: {err}")
    yield c
    c.stop()


def _test_profile(dest: Path) -> Path:
    """workflow/profiles/slurm, adapted to this one-node cluster (module docstring); the rest is the profile's."""
    prof = yaml.safe_load((PROFILE / "config.yaml").read_text())
    prof["default-resources"] = {**prof["default-resources"], "slurm_partition": PARTITION, "mem_mb": 3000,
                                 "cpus_per_task": 1, "runtime": 30}  # fmt: skip
    prof["default-resources"].pop("slurm_account", None)
    here = {"slurm_partition": PARTITION, "gpu": 0, "mem_mb": 3000, "cpus_per_task": 1, "runtime": 30}
    assert "job_pfl_train" in prof["set-resources"]  # the profile sends the pfl training to the GPU partition
    prof["set-resources"] = {rule: {**res, **here} for rule, res in prof["set-resources"].items()}
    # No slurm_account (above): the plug-in's guess via sacct fails and it submits without -A
    # (its --slurm-no-account flag is read by no code in 2.8.0).
    prof.update({"slurm-status-command": "squeue", "slurm-init-seconds-before-status-checks": 3, "jobs": 1})
    dest.mkdir(parents=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(prof, sort_keys=False))
    shutil.copy(PROFILE / "cluster-config.yaml", dest / "cluster-config.yaml")
    return dest


def _env(real_data_root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**os.environ, "FLB_OFFLINE": "1", "FLB_DATA_ROOT": str(real_data_root), "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])), **(extra or {})}  # fmt: skip


def _snakemake(work: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(ROOT / "workflow" / "Snakefile"), "--directory", str(work),
            TARGET, "--config", *CONFIG, *args]  # fmt: skip


def _jobs(cluster: SingleNodeSlurm) -> list[tuple[str, str]]:
    """(job id, state) of every job the cluster still lists (finished ones for MinJobAge seconds)."""
    out = cluster.run("squeue", "-h", "--states=all", "-o", "%i|%T").stdout
    return sorted((tuple(line.split("|")) for line in out.split()), key=lambda j: int(j[0]))


def _flat_model(path: Path) -> dict:
    import torch

    def tensors(tree, prefix=""):
        for k, v in tree.items():
            yield from tensors(v, f"{prefix}{k}.") if isinstance(v, dict) else [(prefix + str(k), v)]

    model = torch.load(path, weights_only=True)
    return {f"{k}/{n}": t for k, part in model.items() for n, t in tensors(part)}


def test_a_cancelled_training_job_is_resubmitted_and_resumes_to_the_uninterrupted_numbers(
    cluster, real_data_root, tmp_path
):
    import torch

    from benchmark.io import read_sealed

    # The reference: the same job, same config, run locally without interruption.
    whole = tmp_path / "whole"
    proc = subprocess.run(_snakemake(whole, "--cores", "1"), capture_output=True, text=True, timeout=600,
                          env=_env(real_data_root))  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    want = json.loads((whole / TARGET).read_text())

    # The same job through the SLURM profile; cancelled once its first checkpoint is on disk.
    cut = tmp_path / "cut"
    profile = _test_profile(tmp_path / "profile")
    t0 = time.monotonic()
    log = open(tmp_path / "snakemake-slurm.log", "w")
    run = subprocess.Popen(_snakemake(cut, "--workflow-profile", str(profile)), stdout=log, stderr=subprocess.STDOUT,
                           env=_env(real_data_root, cluster.env()))  # fmt: skip
    try:
        ckpt = cut / CKPT
        while not ckpt.exists():
            assert run.poll() is None, (tmp_path / "snakemake-slurm.log").read_text()[-3000:]
            assert time.monotonic() - t0 < 300, "no checkpoint after 300 s"
            time.sleep(0.1)
        # Held still from its first checkpoint until SLURM's SIGTERM is pending, so that the cancel lands in the
        # round after that checkpoint on any machine: with the job running on, rounds of a second or less ended
        # the run before the signal came (round 6 of 6 ends the run anyway), and the retry had nothing to resume.
        trainer = _training_process()
        os.kill(trainer, signal.SIGSTOP)
        while _state(trainer) not in "Tt":
            assert _state(trainer) != "X", "the training process ended before it could be held"
            time.sleep(0.001)
        [(first, state)] = _jobs(cluster)
        assert state == "RUNNING"
        cluster.run("scancel", first)
        t1 = time.monotonic()
        while not _sigterm_pending_or_resumed(trainer):
            assert time.monotonic() - t1 < 60, "SLURM sent no SIGTERM within 60 s of scancel"
            time.sleep(0.01)
        os.kill(trainer, signal.SIGCONT)
        while dict(_jobs(cluster))[first] != "CANCELLED":
            time.sleep(0.1)
        while any(p.name == "slurmstepd" for p in _procs()):  # the job's processes are gone
            time.sleep(0.1)
        assert not (cut / TARGET).exists()
        state = torch.load(io.BytesIO(read_sealed(ckpt)), weights_only=True)  # what the retry resumes from
        # cancelled after round 3's checkpoint: the job ended the round in progress and checkpointed it (not due)
        assert EVERY < state["round"] < ROUNDS
        rc = run.wait(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
        log.close()
    out = (tmp_path / "snakemake-slurm.log").read_text()
    assert rc == 0, out[-3000:]
    print(f"SLURM run: {time.monotonic() - t0:.0f} s; killed after round {state['round']}")

    # Two submissions of the one job: the cancelled one and the retry that completed it.
    jobs = _jobs(cluster)
    assert [s for _, s in jobs] == ["CANCELLED", "COMPLETED"], jobs
    job_log = (cut / "results" / "logs" / "jobs" / TARGET.removeprefix("results/")).with_suffix(".json.log")
    assert f"after round {state['round']}/{ROUNDS}" in job_log.read_text()  # the retry's own log
    assert jobs[0][0] == first
    assert not ckpt.exists()  # removed once the run's outputs are written

    got = json.loads((cut / TARGET).read_text())
    kept = lambda rows: [(h["round"], h["train_loss"], h["wall_s"]) for h in rows]
    assert kept(got["history"][: state["round"]]) == kept(state["history"])  # resumed, not restarted
    strip = lambda h: [{k: v for k, v in row.items() if k != "wall_s"} for row in h]
    assert strip(got["history"]) == strip(want["history"]) and len(got["history"]) == ROUNDS
    assert got["initial"] == want["initial"] and got["selected_round"] == want["selected_round"]
    assert got["last_accuracy"] == want["last_accuracy"]
    model = TARGET.replace(".json", ".model.pt")
    a, b = _flat_model(whole / model), _flat_model(cut / model)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # the same weights, bit for bit


class _Proc:
    def __init__(self, pid: str) -> None:
        self.pid = int(pid)
        try:
            self.name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            self.name = ""


def _procs() -> list[_Proc]:
    return [_Proc(p) for p in os.listdir("/proc") if p.isdigit()]


def _training_process() -> int:
    """The pid of the one ``flb job`` process (``python -m benchmark.cli job ...``) that SLURM started."""
    found = []
    for p in _procs():
        try:
            args = Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"benchmark.cli" in args and b"job" in args and _under_slurmstepd(p.pid):
            found.append(p.pid)
    assert len(found) == 1, f"expected one flb job process under slurmstepd, found {found}"
    return found[0]


def _under_slurmstepd(pid: int) -> bool:
    while pid > 1:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if name == "slurmstepd":
            return True
        pid = int(rest[1])  # the parent
    return False


def _sigterm_pending_or_resumed(pid: int) -> bool:
    """SIGTERM pending for ``pid`` (held by SIGSTOP), or ``pid`` running again (SLURM sends SIGCONT before
    its SIGTERM) or gone."""
    status = _status(pid)
    if status is None:
        return True
    term = 1 << (signal.SIGTERM - 1)
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return bool(pending & term) or status["State"][0] not in "Tt"


def _status(pid: int) -> dict[str, str] | None:
    """/proc/PID/status as a dict (None once the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def _state(pid: int) -> str:
    """The one-letter state of ``pid`` (``T`` stopped), ``X`` once it is gone."""
    status = _status(pid)
    return "X" if status is None else status["State"][0]
