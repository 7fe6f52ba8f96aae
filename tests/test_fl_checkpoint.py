"""Long runs: checkpoint / resume (after a real ``kill -9``), progress lines in logs, measured communication.

Resume must be bit-identical to an uninterrupted run *on the same machine* (same computation twice: exact
equality is the claim, not a tolerance). The killed runs execute in a subprocess that imports this module's
:func:`run_case`, so both sides build the same tiny model, data and configuration.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

import benchmark.fl.engine as engine
from benchmark.errors import ConfigError, CorruptFileError
from benchmark.federated.checkpoint import CheckpointSpec, save_checkpoint
from benchmark.federated.loop import StopRequested, clear_stop_request, request_stop
from benchmark.federated.progress import RoundProgress, format_eta, progress_line
from benchmark.fl.config import FLConfig
from benchmark.fl.engine import ModelTrainer, RunResult, run_federated
from benchmark.fl.lp_features import CachedFeatures, run_lp_features
from benchmark.fl.methods import init_head, run_lp, run_method
from benchmark.models.classifier import Classifier
from tests.fl_tiny import C, D, TinyBody, seeded_classifier

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]


def make_model(seed: int = 0) -> Classifier:
    return seeded_classifier(TinyBody(), D, C, seed)[0]


def make_data(sizes: tuple[int, ...] = (10, 13, 16, 19), seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    clients = [
        TensorDataset(torch.randn(n, 3, 6, 6, generator=gen), torch.randint(0, C, (n,), generator=gen))
        for n in sizes
    ]
    test = TensorDataset(torch.randn(24, 3, 6, 6, generator=gen), torch.randint(0, C, (24,), generator=gen))
    return clients, test


def cfg_for(**kw: object) -> FLConfig:
    base: dict[str, object] = {
        "num_clients": 4,
        "participation": 0.5,
        "rounds": 6,
        "batch_size": 8,
        "client_lr": 0.1,
        "client_shuffle": True,  # data order keyed by (round, client) must survive the resume
        "bn_stats": "aggregate",
        "progress": False,
        "device": "cpu",
    }
    base.update(kw)
    return FLConfig(**base)  # type: ignore[arg-type]


#: name -> config of the resume cases (FedAdam: server optimiser state matters; lp_ft: two stages).
CASES: dict[str, dict[str, object]] = {
    "ft_fedavg": {"method": "ft"},
    "ft_fedadam": {"method": "ft", "server_opt": "fedadam", "server_lr": 0.05},
    "lp_ft_fedadam": {"method": "lp_ft", "server_opt": "fedadam", "server_lr": 0.05, "lp_stage_rounds": 4},
}


@contextmanager
def round_hook(hook: Callable[[int], None]) -> Iterator[None]:
    """Give every :func:`engine.run_rounds` call of the block ``on_round_end=hook`` (the methods do not
    expose the hook; the engine's own parameter is what is exercised)."""
    original = engine.run_rounds

    def wrapped(*args, **kw):
        kw["on_round_end"] = hook
        return original(*args, **kw)

    engine.run_rounds = wrapped
    try:
        yield
    finally:
        engine.run_rounds = original


def run_case(
    case: str,
    ckpt: Path | None,
    *,
    kill_at: int | None = None,
    raise_at: int | None = None,
    ask_stop_at: int | None = None,
    term_at: int | None = None,
) -> tuple[RunResult, Classifier, list[int]]:
    """Run ``CASES[case]`` through :func:`run_method` with a checkpoint every 2 rounds; ``kill_at``: SIGKILL
    this process once that (absolute) round is complete and checkpointed; ``raise_at``: raise instead;
    ``ask_stop_at``: :func:`request_stop` then, as a harvest's SIGTERM would; ``term_at``: send this process a
    SIGTERM then (``flb job``'s handler).
    Returns the result, the trained model and the rounds completed by this call."""
    torch.set_num_threads(1)
    model = make_model()
    clients, test = make_data()
    seen: list[int] = []

    def hook(r: int) -> None:
        seen.append(r)
        if r == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if r == raise_at:
            raise KeyboardInterrupt(f"interrupted after round {r}")
        if r == ask_stop_at:
            request_stop()
        if r == term_at:
            os.kill(os.getpid(), signal.SIGTERM)

    spec = CheckpointSpec(ckpt, every=2) if ckpt is not None else None
    with round_hook(hook):
        res = run_method(cfg_for(**CASES[case]), model=model, clients=clients, test=test, checkpoint=spec)
    return res, model, seen


def rows_of(res: RunResult) -> list[dict[str, str]]:
    """History rows without wall time, every value as its repr (exact floats, NaN == NaN)."""
    return [{k: repr(v) for k, v in r.as_dict().items() if k != "wall_s"} for r in res.history]


def assert_same_run(got: tuple[RunResult, nn.Module], want: tuple[RunResult, nn.Module]) -> None:
    (res, model), (ref, ref_model) = got, want
    assert rows_of(res) == rows_of(ref)
    assert {k: v for k, v in asdict(res.costs).items() if k != "wall_s"} == {
        k: v for k, v in asdict(ref.costs).items() if k != "wall_s"
    }
    assert (res.best_acc, res.best_round, res.last_acc) == (ref.best_acc, ref.best_round, ref.last_acc)
    want_state = ref_model.state_dict()
    for k, v in model.state_dict().items():
        assert torch.equal(v, want_state[k]), k


def run_killed(case: str, ckpt: Path, kill_at: int) -> subprocess.CompletedProcess:
    script = (
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]\n"
        "from pathlib import Path\n"
        "from test_fl_checkpoint import run_case\n"
        f"run_case({case!r}, Path({str(ckpt)!r}), kill_at={kill_at})\n"
        "sys.exit(3)  # not reached: the hook kills the process\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )


# ------------------------------------------------------------------------------------------------ resume
@pytest.mark.parametrize(
    ("case", "kill_at", "resumed_rounds"),
    [
        ("ft_fedavg", 3, [3, 4, 5, 6]),
        ("ft_fedadam", 3, [3, 4, 5, 6]),
        ("lp_ft_fedadam", 3, [3, 4, 5, 6, 7, 8, 9, 10]),  # killed in the LP stage (4 rounds)
        ("lp_ft_fedadam", 7, [7, 8, 9, 10]),  # killed in the FT stage: LP restored from its file, not rerun
    ],
)
def test_resume_after_sigkill_is_bit_identical(
    tmp_path: Path, case: str, kill_at: int, resumed_rounds: list[int]
) -> None:
    ckpt = tmp_path / "run.ckpt"
    proc = run_killed(case, ckpt, kill_at)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert not [f for f in files if f.startswith(".")], files  # no temp file left behind
    res, model, seen = run_case(case, ckpt)
    assert seen == resumed_rounds  # resumed from the last checkpoint (round 2 / 6 / LP's 2), not from 0
    ref, ref_model, _ = run_case(case, None)
    assert_same_run((res, model), (ref, ref_model))
    if case.startswith("lp_ft"):
        assert {"run.lp.ckpt", "run.ft.ckpt"} <= set(p.name for p in tmp_path.iterdir())
        assert [r.stage for r in res.history].count("lp") == 5  # round 0 + 4 LP rounds, recorded once


@pytest.mark.parametrize(
    ("case", "ask_at", "stopped", "resumed_rounds"),
    [
        ("ft_fedavg", 2, ("run.ckpt", 3), [4, 5, 6]),  # round 3: no periodic checkpoint (every 2)
        ("lp_ft_fedadam", 2, ("run.lp.ckpt", 3), [4, 5, 6, 7, 8, 9, 10]),  # in the LP stage (4 rounds)
        ("lp_ft_fedadam", 4, ("run.lp.ckpt", 4), [5, 6, 7, 8, 9, 10]),  # LP done: FT does not begin
    ],
)
def test_a_stop_request_ends_the_round_checkpoints_it_and_resumes_bit_identically(
    tmp_path: Path, case: str, ask_at: int, stopped: tuple[str, int], resumed_rounds: list[int]
) -> None:
    """A stop asked for during a round (a harvest's SIGTERM at its budget) ends the run after that round, with
    its checkpoint written there although none is due; the run started again resumes after it and equals an
    uninterrupted run bit for bit. Asked for during a stage's last round, the stage ends and the next one stops
    before its first round."""
    from benchmark.io import read_sealed

    ckpt = tmp_path / "run.ckpt"
    try:
        with pytest.raises(StopRequested):
            run_case(case, ckpt, ask_stop_at=ask_at)
    finally:
        clear_stop_request()
    name, rounds = stopped
    state = torch.load(io.BytesIO(read_sealed(tmp_path / name)), weights_only=True)
    assert state["round"] == rounds
    assert not (tmp_path / "run.ft.ckpt").exists()
    res, model, seen = run_case(case, ckpt)
    assert seen == resumed_rounds
    assert_same_run((res, model), run_case(case, None)[:2])


def run_flb_job(tmp_path: Path, term_at: int | None) -> subprocess.CompletedProcess:
    """``flb job`` (:func:`benchmark.cli.main`) in a subprocess, of a job type registered there whose
    ``execute`` is ``run_case("ft_fedavg", <tmp_path>/run.ckpt, term_at=term_at)`` then writes its output; with
    ``term_at=None`` the SIGTERM comes before the training starts."""
    job = {"kind": "sigterm_probe", "seed": 0}
    script = f"""
import json, os, signal, sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT)!r}]
from benchmark import cli
from benchmark.jobs import Job, register_job
from test_fl_checkpoint import run_case

TERM_AT = {term_at!r}


@register_job
@dataclass(frozen=True)
class SigtermProbe(Job):
    KIND: ClassVar[str] = "sigterm_probe"
    PATTERN: ClassVar[str] = {str(tmp_path / 'out-{seed}.txt')!r}
    seed: int

    def checkpoint_file(self):
        return Path({str(tmp_path / 'run.ckpt')!r})

    def execute(self, config):
        if TERM_AT is None:
            os.kill(os.getpid(), signal.SIGTERM)
        run_case("ft_fedavg", self.checkpoint_file(), term_at=TERM_AT)
        Path(self.path).write_text("done")

sys.exit(cli.main(["job", {json.dumps(job)!r}]))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_flb_job_on_sigterm_ends_the_round_checkpoints_it_and_exits_143(tmp_path: Path) -> None:
    """SIGTERM to ``flb job`` (SLURM's at a time limit, before its SIGKILL) during round 3 of a run that
    checkpoints every 2 rounds: the round ends, its checkpoint is written there although none is due, the job
    exits with 143 and writes no output, and the same run resumes at round 4 to the numbers of an uninterrupted
    one. A SIGTERM before the training's rounds stops the job at once (143, no checkpoint)."""
    from benchmark.cli import EXIT_TERMINATED
    from benchmark.io import read_sealed

    proc = run_flb_job(tmp_path, term_at=2)  # sent at the end of round 2: arrives as round 3 begins
    assert proc.returncode == EXIT_TERMINATED, proc.stderr[-3000:]
    assert "stopped by SIGTERM after round 3" in proc.stderr and not (tmp_path / "out-0.txt").exists()
    state = torch.load(io.BytesIO(read_sealed(tmp_path / "run.ckpt")), weights_only=True)
    assert state["round"] == 3
    res, model, seen = run_case("ft_fedavg", tmp_path / "run.ckpt")
    assert seen == [4, 5, 6]
    assert_same_run((res, model), run_case("ft_fedavg", None)[:2])

    early = tmp_path / "early"
    early.mkdir()
    proc = run_flb_job(early, term_at=None)
    assert proc.returncode == EXIT_TERMINATED, proc.stderr[-3000:]
    assert "stopped by SIGTERM;" in proc.stderr and not list(early.iterdir())


def test_finished_checkpoint_returns_without_training(tmp_path: Path) -> None:
    ckpt = tmp_path / "run.ckpt"
    first, model, _ = run_case("ft_fedadam", ckpt)
    again, model2, seen = run_case("ft_fedadam", ckpt)
    assert seen == []
    assert_same_run((again, model2), (first, model))


def test_cached_feature_lp_resumes_bit_identically(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(3)
    x, y = torch.randn(60, 5, generator=gen), torch.randint(0, C, (60,), generator=gen)
    idx = [np.arange(k * 15, (k + 1) * 15) for k in range(4)]
    feats = CachedFeatures(x, y, idx, x[:20], y[:20], C)
    cfg = cfg_for(method="lp", server_opt="fedavgm", server_lr=0.5)
    head = init_head(cfg, 5, C)
    ckpt = CheckpointSpec(tmp_path / "lp.ckpt", every=2)

    def crash(r: int) -> None:
        if r == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_lp_features(feats, cfg, head, checkpoint=ckpt, on_round_end=crash)
    res = run_lp_features(feats, cfg, head, checkpoint=ckpt)
    ref = run_lp_features(feats, cfg, head)
    assert rows_of(res) == rows_of(ref)
    for k, v in ref.head_state.items():
        assert np.array_equal(res.head_state[k], v)


# ------------------------------------------------------------------------------------------------ refusals
def read_sealed_payload(data: bytes) -> bytes:
    """The torch payload of a sealed checkpoint's bytes (after its header line)."""
    return data.split(b"\n", 1)[1]


def _ft_checkpoint(tmp_path: Path, **kw: object) -> tuple[CheckpointSpec, FLConfig]:
    spec = CheckpointSpec(tmp_path / "ft.ckpt", every=1)
    cfg = cfg_for(rounds=2, **kw)
    clients, test = make_data()
    run_federated(make_model(), clients, test, cfg, train_part="all", method="ft", checkpoint=spec)
    return spec, cfg


def test_checkpoint_of_another_config_or_stage_is_refused(tmp_path: Path) -> None:
    spec, cfg = _ft_checkpoint(tmp_path)
    clients, test = make_data()
    with pytest.raises(ConfigError, match=r"ft\.ckpt belongs to another run.*config\.client_lr"):
        run_federated(
            make_model(),
            clients,
            test,
            replace(cfg, client_lr=0.2),
            train_part="all",
            method="ft",
            checkpoint=spec,
        )
    with pytest.raises(ConfigError, match=r"ft\.ckpt belongs to another run.*stage"):
        run_federated(
            make_model(), clients, test, cfg, train_part="all", method="ft", stage="x", checkpoint=spec
        )
    with pytest.raises(ConfigError, match=r"ft\.ckpt belongs to another run.*method"):
        run_federated(make_model(), clients, test, cfg, train_part="all", method="random", checkpoint=spec)
    # cosmetic fields do not block a resume
    res = run_federated(
        make_model(),
        clients,
        test,
        replace(cfg, progress=True),
        train_part="all",
        method="ft",
        checkpoint=spec,
    )
    assert res.history[-1].round == 2


def test_truncated_or_unknown_version_checkpoint_is_refused(tmp_path: Path) -> None:
    spec, cfg = _ft_checkpoint(tmp_path)
    clients, test = make_data()
    data = spec.path.read_bytes()
    spec.path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match=r"ft\.ckpt is truncated or corrupt.*delete it to restart the run"):
        run_federated(make_model(), clients, test, cfg, train_part="all", method="ft", checkpoint=spec)
    state = torch.load(io.BytesIO(read_sealed_payload(data)), weights_only=True)
    save_checkpoint(spec.path, {**state, "version": 99})
    with pytest.raises(ConfigError, match=r"ft\.ckpt has format version 99"):
        run_federated(make_model(), clients, test, cfg, train_part="all", method="ft", checkpoint=spec)


def test_checkpoint_of_another_model_is_refused(tmp_path: Path) -> None:
    spec, cfg = _ft_checkpoint(tmp_path)
    clients, test = make_data()
    other = Classifier(TinyBody(), nn.Linear(D, C))
    other.body.conv = nn.Conv2d(3, D, 1)  # same names, other shapes
    with pytest.raises(ConfigError, match=r"ft\.ckpt does not fit this run's model"):
        run_federated(other, clients, test, cfg, train_part="all", method="ft", checkpoint=spec)


def test_checkpoint_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, _ = _ft_checkpoint(tmp_path)
    before = spec.path.read_bytes()

    def broken_save(obj, f, *a, **kw) -> None:
        f.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(spec.path, {"round": 3})
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "new.ckpt", {"round": 3})
    assert spec.path.read_bytes() == before  # the previous checkpoint is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ft.ckpt"]  # no partial or temp file


def test_checkpoint_spec_validates_and_names_stages() -> None:
    with pytest.raises(ConfigError, match="every must be an integer >= 1"):
        CheckpointSpec(Path("x.ckpt"), every=0)
    spec = CheckpointSpec("out/run.ckpt", every=3)  # type: ignore[arg-type]
    assert spec.for_stage("lp").path == Path("out/run.lp.ckpt") and spec.for_stage("").path == spec.path
    assert [d for d in range(1, 8) if spec.due(d, 7)] == [3, 6, 7]


# ------------------------------------------------------------------------------------------------ progress
LINE = re.compile(
    r"^\[(?P<label>[^\]]+)\] round (?P<r>\d+)/(?P<n>\d+)  \d+\.\d\d rounds/s  ETA \d\d:\d\d:\d\d  acc (\d\.\d{4}|nan)$"
)


def test_progress_lines_when_stderr_is_not_a_tty(capfd: pytest.CaptureFixture[str]) -> None:
    clients, test = make_data()
    cfg = cfg_for(rounds=5, progress=True, eval_every=2)
    run_federated(make_model(), clients, test, cfg, train_part="all", method="ft", stage="ft")
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 5, err  # rounds // 20 == 0 -> a line every round
    for k, line in enumerate(err, 1):
        m = LINE.match(line)
        assert m and m["label"] == "ft/ft" and int(m["r"]) == k and m["n"] == "5", line
    # progress=False is silent
    run_federated(make_model(), clients, test, replace(cfg, progress=False), train_part="all", method="ft")
    assert capfd.readouterr() == ("", "")


def test_progress_line_cadence_and_format() -> None:
    out = io.StringIO()  # not a TTY
    p = RoundProgress("lp_ft/ft", 45, done=4, stream=out)
    p.set_acc(0.5)
    for r in range(5, 46):
        p.set_acc(float("nan"))  # rows without evaluation keep the last accuracy
        p.round_done(r)
    p.close()
    lines = out.getvalue().splitlines()
    # a line every 45 // 20 = 2 rounds, and one at the end
    assert [int(LINE.match(x)["r"]) for x in lines] == [*range(6, 45, 2), 45]
    assert all(x.endswith("acc 0.5000") for x in lines)
    assert progress_line("m", 10, 40, 2.0, 0.25) == "[m] round 10/40  2.00 rounds/s  ETA 00:00:15  acc 0.2500"
    assert format_eta(3 * 3600 + 61) == "03:01:01" and format_eta(float("inf")) == "--:--:--"


def test_progress_bar_on_a_tty_counts_rounds() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    p = RoundProgress("ft", 3, stream=out)
    for r in range(1, 4):
        p.set_acc(0.75)
        p.round_done(r)
    p.close()
    text = out.getvalue()
    assert "3/3" in text and "round/s" in text and "acc=0.7500" in text


# ------------------------------------------------------------------------------------------------ measured comm
def _assert_measured_equals_arithmetic(res: RunResult) -> None:
    assert res.costs.uplink_bytes_measured == res.costs.uplink_bytes > 0
    assert res.costs.downlink_bytes_measured == res.costs.downlink_bytes > 0
    for r in res.history:
        assert (r.uplink_bytes_measured, r.downlink_bytes_measured) == (r.uplink_bytes, r.downlink_bytes)


@pytest.mark.parametrize("bn_stats", ["frozen_global", "aggregate"])
def test_measured_communication_equals_arithmetic_ft(bn_stats: str) -> None:
    clients, test = make_data()
    cfg = cfg_for(rounds=3, bn_stats=bn_stats)
    res = run_federated(make_model(), clients, test, cfg, train_part="all", method="ft")
    _assert_measured_equals_arithmetic(res)
    floats = sum(p.numel() for p in make_model().parameters()) + (2 * D if bn_stats == "aggregate" else 0)
    assert res.costs.uplink_bytes_measured == 3 * 2 * floats * 4  # rounds * m * floats * 4 bytes
    raw = res.meta["uplink_floats_per_client"] * 4
    assert raw < res.meta["uplink_payload_serialized_bytes"] < raw + 4096  # torch.save framing on top


def test_measured_communication_of_vectorised_clients_equals_the_loops() -> None:
    """The vectorised trainer counts the tensors its clients return and receive, like the loop."""
    clients, test = make_data()
    cfg = cfg_for(rounds=3, bn_stats="frozen_global")
    loop = run_federated(make_model(), clients, test, cfg, train_part="all", method="ft")
    vec = run_federated(
        make_model(), clients, test, replace(cfg, client_exec="vectorised", vector_chunk=2), train_part="all",
        method="ft",
    )  # fmt: skip
    assert vec.meta.get("client_exec", "vectorised") != "loop"
    _assert_measured_equals_arithmetic(vec)
    assert vec.costs.uplink_bytes_measured == loop.costs.uplink_bytes_measured
    assert vec.costs.downlink_bytes_measured == loop.costs.downlink_bytes_measured


@pytest.mark.parametrize("frozen_params", ["untouched", "server_opt_drift"])
def test_measured_communication_equals_arithmetic_lp_on_model(frozen_params: str) -> None:
    clients, test = make_data()
    cfg = cfg_for(rounds=3, method="lp", bn_stats="frozen_global", frozen_params=frozen_params)
    res = run_lp(cfg, model=make_model(), clients=clients, test=test)
    _assert_measured_equals_arithmetic(res)
    assert res.costs.uplink_bytes_measured == 3 * 2 * (C * D + C) * 4  # the head only, bias included
    if frozen_params == "untouched":
        assert res.costs.downlink_bytes_measured == res.costs.uplink_bytes_measured


def test_measured_communication_reads_the_payload_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """If a frozen tensor went up the wire, measured and arithmetic would disagree (the measurement looks
    at the payload, not at the precomputed counts)."""
    original = ModelTrainer.client_update

    def leaky(self, gparams):
        out = original(self, gparams)
        out["body.conv.weight"] = torch.zeros_like(gparams["body.conv.weight"])  # a frozen tensor sent
        return out

    monkeypatch.setattr(ModelTrainer, "client_update", leaky)
    clients, test = make_data()
    res = run_lp(cfg_for(rounds=3, method="lp"), model=make_model(), clients=clients, test=test)
    extra = 3 * 2 * make_model().body.conv.weight.numel() * 4
    assert res.costs.uplink_bytes_measured == res.costs.uplink_bytes + extra


def test_client_without_data_receives_but_returns_nothing() -> None:
    clients, test = make_data(sizes=(0, 10, 13, 16))
    cfg = cfg_for(rounds=1, participation=1.0, bn_stats="frozen_global")
    res = run_federated(make_model(), clients, test, cfg, train_part="all", method="ft")
    per_client = res.meta["uplink_floats_per_client"] * 4
    assert res.costs.uplink_bytes == 4 * per_client and res.costs.uplink_bytes_measured == 3 * per_client
    assert res.costs.downlink_bytes_measured == res.costs.downlink_bytes


def test_cached_feature_trainer_does_not_claim_a_measurement() -> None:
    x, y = torch.randn(40, 5), torch.randint(0, C, (40,))
    feats = CachedFeatures(x, y, [np.arange(k * 10, (k + 1) * 10) for k in range(4)], x, y, C)
    cfg = cfg_for(rounds=2, method="lp")
    res = run_lp_features(feats, cfg, init_head(cfg, 5, C))
    assert res.costs.uplink_bytes > 0 and res.costs.uplink_bytes_measured is None
