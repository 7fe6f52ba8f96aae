"""The ``fl_train`` runner's job end to end on this CPU: the reduced configuration (the pinned guard) as a
training protocol, run by the command the generated Snakemake rule runs (``flb job '<json>'``)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.apps import reduced
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.jobs import job_to_dict

ROOT = Path(__file__).resolve().parents[1]


def test_the_reduced_protocol_is_exactly_the_pinned_configuration() -> None:
    """The runner's protocol and the pinned guard's ReducedConfig must not drift apart: same engine config."""
    rc = reduced.ReducedConfig()
    proto = get_train_protocol(reduced.RUNNER_PROTOCOL)
    assert (proto.dataset, proto.backbone, proto.preprocess, proto.dtype) == (
        rc.dataset, rc.backbone, rc.preprocess, rc.dtype,
    )  # fmt: skip
    assert proto.subset == f"stratified{rc.train_per_class}" and rc.train_per_class == rc.test_per_class
    assert proto.partition() == {"scheme": "dirichlet", "num_clients": rc.num_clients, "alpha": rc.alpha}
    for method, engine in (("ft", "ft"), ("fedncm_ft", "head_ft")):
        got = proto.fl_config(method, "fedavg", seed=3, device="cpu", progress=False).to_dict()
        want = dataclasses.replace(rc.fl_config(3), method=engine).to_dict()
        assert got == want, method


def _flb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "benchmark.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.slow
@pytest.mark.realdata
def test_a_training_job_runs_through_the_rule_command_and_writes_its_outputs(
    tmp_path, real_data_root, real_weights_dir, monkeypatch
) -> None:
    """`flb job` of the partition and of the FT job (what job_fl_train runs): tidy rows with the arithmetic and
    measured bytes, the per-round curve, the record; the accuracy is the pinned guard's (same computation)."""
    pinned = json.loads(reduced.PINNED_PATH.read_text())
    job = reduced.runner_job("ft", 0)
    sets = [
        "--set",
        f"data_root={real_data_root}",
        "--set",
        f"weights_dir={real_weights_dir}",
        "--set",
        "device=cpu",
    ]
    for j in (*job.inputs(), job):
        r = _flb("job", json.dumps(job_to_dict(j)), *sets, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
    import pandas as pd

    rows = pd.read_csv(tmp_path / job.path)
    value = dict(zip(rows["metric"], rows["value"], strict=True))
    want = pinned["values"]["ft"]["0"]
    assert abs(value["accuracy"] - want["reported_accuracy"]) <= pinned["tolerance"]["accuracy_abs"] + 1e-9
    assert value["uplink_bytes"] == want["uplink_bytes"] and value["downlink_bytes"] == want["downlink_bytes"]
    assert value["compute_f"] == want["compute_f"] and value["rounds"] == 10
    assert set(rows["fl_algorithm"]) == {"fedavg"} and value["client_lr"] == pytest.approx(0.001)
    if (
        "uplink_bytes_measured" in value
    ):  # the tensors that crossed the wire, counted: equal to the arithmetic
        assert value["uplink_bytes_measured"] == value["uplink_bytes"]
        assert value["downlink_bytes_measured"] == value["downlink_bytes"]
    curve = pd.read_csv(tmp_path / job.curve_path)
    assert list(curve["round"]) == list(range(11))
    record = json.loads((tmp_path / job.record_path).read_text())
    assert record["protocol"]["name"] == reduced.RUNNER_PROTOCOL and record["git_commit"]
    assert record["config"]["client_lr"] == 0.001 and record["inputs"]["partition"]["sha256"]
    # the runner's collect step: the cell's value per seed, and the note with the lr and measured communication
    from types import SimpleNamespace

    from benchmark.runners.fl_train import FLTrainRunner

    monkeypatch.chdir(tmp_path)
    spec = SimpleNamespace(paper="suite", table="reduced", seeds=(0,))
    plan = SimpleNamespace(cell=SimpleNamespace(id="cifar10/ft"), method="ft", jobs=(job,))
    cell = FLTrainRunner().collect(spec, plan, {}, {})
    # the cell reports the last round (fl_report_round: last, issue 26), the run's own accuracy row its selection
    assert cell.reason is None and cell.values == [value["accuracy_last"]] and value["accuracy_last"] != value["accuracy"]
    assert "client lr 0.001" in cell.note and "GB measured" in cell.note, cell.note


@pytest.mark.slow
@pytest.mark.realdata
def test_a_training_run_on_kept_preprocessed_images_is_the_same_run(
    tmp_path, real_data_root, real_weights_dir, monkeypatch
) -> None:
    """The reduced FT run through the runner's request with the images preprocessed once and kept
    (keep_preprocessed=on) and without (off): the same accuracies every round, the same communication, bit for
    bit; the record says which it was."""
    from benchmark.fl import jobs

    monkeypatch.chdir(tmp_path)  # the partition job writes under results/
    decided = []
    real_keep = jobs.keep_if_fits
    monkeypatch.setattr(jobs, "keep_if_fits", lambda images, mode: decided.append(real_keep(images, mode)) or decided[-1])
    runs = {
        mode: reduced.run_via_runner(
            "ft", 0, data_root=real_data_root, weights_dir=real_weights_dir, keep_preprocessed=mode
        )
        for mode in ("on", "off")
    }
    assert [d.split(" (")[0] for d in decided] == ["kept", "kept", "not kept", "not kept"]  # train and test sets
    assert reduced.summary(runs["on"][0]) == reduced.summary(runs["off"][0])
    assert runs["on"][1] == runs["off"][1]  # the same inputs (hashed preprocessed images, partition, weights)


_KILLED_JOB = """
import os, signal, sys
from benchmark.fl import engine
real = engine.run_rounds

def killing(*args, **kw):
    def hook(r):
        if r == {kill_after}:
            os.kill(os.getpid(), signal.SIGKILL)
    kw["on_round_end"] = hook
    return real(*args, **kw)

engine.run_rounds = killing
from benchmark.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.realdata
def test_a_killed_training_job_resumes_from_its_checkpoint_with_an_identical_result(
    tmp_path, real_data_root, real_weights_dir
) -> None:
    """kill -9 after round 6 of 10 (checkpoint every 2 rounds), rerun the same `flb job`: it resumes from
    round 6 and its tidy rows and curve equal an uninterrupted run's (wall times aside), bit for bit."""
    import pandas as pd

    job = reduced.runner_job("fedncm_ft", 0)
    sets = ["--set", f"data_root={real_data_root}", "--set", f"weights_dir={real_weights_dir}", "--set",
            "device=cpu", "--set", "checkpoint_every=2"]  # fmt: skip
    runs = {}
    for name in ("straight", "killed"):
        cwd = tmp_path / name
        cwd.mkdir()
        for j in job.inputs():
            assert _flb("job", json.dumps(job_to_dict(j)), *sets, cwd=cwd).returncode == 0
        arg = json.dumps(job_to_dict(job))
        if name == "killed":
            script = cwd / "kill.py"
            script.write_text(_KILLED_JOB.format(kill_after=6))
            env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
            r = subprocess.run([sys.executable, str(script), "job", arg, *sets], cwd=cwd, env=env,
                               capture_output=True, text=True, timeout=900)  # fmt: skip
            assert r.returncode == -9, r.stderr[-2000:]
            assert not (cwd / job.path).exists()
            ckpts = list((cwd / "results" / "checkpoints").rglob("*"))
            assert any(p.is_file() for p in ckpts), "no checkpoint was written before the kill"
        r = _flb("job", arg, *sets, cwd=cwd)
        assert r.returncode == 0, r.stderr[-3000:]
        runs[name] = (pd.read_csv(cwd / job.path), pd.read_csv(cwd / job.curve_path), r.stderr)
    assert "resuming from" in runs["killed"][2] and "after round 6/10" in runs["killed"][2], runs["killed"][
        2
    ][-2000:]
    skip = ["wall_s", "peak_rss_mb", "value"]
    a, b = runs["straight"][0], runs["killed"][0]
    timing = a["metric"].isin(["train_images_per_s"])
    pd.testing.assert_frame_equal(a[~timing].drop(columns=skip), b[~timing].drop(columns=skip))
    pd.testing.assert_series_equal(a[~timing]["value"], b[~timing]["value"])
    ca, cb = runs["straight"][1].drop(columns=["wall_s"]), runs["killed"][1].drop(columns=["wall_s"])
    pd.testing.assert_frame_equal(ca, cb)


def test_the_guard_refuses_a_reduced_config_the_runner_protocol_would_ignore() -> None:
    """Only the runner's knobs (threads, dtype, client lr) may vary; anything else is the protocol's."""
    from benchmark.errors import ConfigError

    with pytest.raises(ConfigError, match="fixes every ReducedConfig field"):
        reduced.run_via_runner("ft", 0, rc=dataclasses.replace(reduced.ReducedConfig(), rounds=3))
