"""Integrity of every file a job writes and a later step reads back (issue 23: items 2 and 5, and the poor
handling of umask, killed writers, a full disk and a read-only ``results/``).

One test per case; each feeds the fault and asserts the exact error (or the correct result) and that nothing
else changed. The faults are simulated: one flipped byte or a truncation of a real file the suite wrote, a
writer killed with SIGKILL, and OS errors raised by monkeypatching (we run as root: chmod does not stop us).
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import struct
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from fl_tiny import C, D, TinyBody, seeded_classifier
from torch.utils.data import TensorDataset
from toy_specs import write_toy_spec

from benchmark import cli
from benchmark.errors import BenchmarkError

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _temps(folder: Path) -> list[str]:
    """Leftover temporary files or folders (every name the suite's writers use starts with a dot)."""
    return sorted(p.name for p in folder.rglob(".*"))


# ================================================================================ case 1: checkpoints
def flip_tensor_byte(path: Path) -> None:
    """Flip one bit in the middle of the largest tensor record of a torch checkpoint. A torch file is a zip
    whose records are stored as they are; torch does not check their CRC, so the load would succeed."""
    with zipfile.ZipFile(path) as z:  # finds the archive also behind a header line (its offsets are shifted)
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    off = info.header_offset
    assert data[off : off + 4] == b"PK\x03\x04"
    name_len, extra_len = struct.unpack("<HH", data[off + 26 : off + 30])
    data[off + 30 + name_len + extra_len + info.compress_size // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _fl_run(ckpt: Path):
    """A 2-round FedAvg fine-tuning of tests/test_fl_checkpoint.py's tiny CNN (:mod:`fl_tiny`) checkpointing
    every round; returns its final weights."""
    from benchmark.federated.checkpoint import CheckpointSpec
    from benchmark.fl.config import FLConfig
    from benchmark.fl.engine import run_federated

    model, gen = seeded_classifier(TinyBody(), D, C, 0)
    clients = [TensorDataset(torch.randn(n, 3, 6, 6, generator=gen), torch.randint(0, 3, (n,), generator=gen))
               for n in (10, 13)]  # fmt: skip
    test = TensorDataset(torch.randn(12, 3, 6, 6, generator=gen), torch.randint(0, 3, (12,), generator=gen))
    cfg = FLConfig(num_clients=2, participation=1.0, rounds=2, batch_size=8, client_lr=0.1, progress=False,
                   device="cpu", method="ft")  # fmt: skip
    run_federated(model, clients, test, cfg, train_part="all", method="ft", checkpoint=CheckpointSpec(ckpt, 1))
    return {k: v.clone() for k, v in model.state_dict().items()}


@dataclass
class _Split:
    images: np.ndarray
    labels: np.ndarray


def _pfl_data():
    from benchmark.federated.images import DeviceImages
    from benchmark.pfl.partition import ClientSplit

    rng = np.random.default_rng(0)
    split = lambda n: _Split(rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8), rng.integers(0, 10, n))
    train = DeviceImages.from_split(split(40), "cifar10", "cpu")
    test = DeviceImages.from_split(split(20), "cifar10", "cpu")
    clients = ClientSplit((np.arange(0, 20), np.arange(20, 40)), (np.arange(0, 10), np.arange(10, 20)))
    return train, test, clients


def _pfl_cfg():
    from benchmark.pfl.trainer import PFLConfig

    return PFLConfig(dataset="cifar10", model="4convnet", algorithm="fedper", clients=2, participation=1.0,
                     local_epochs=1, rounds=2, batch_size=10, seed=0)  # fmt: skip


def _pfl_run(ckpt: Path | None):
    """fedbabu's trainer (FedPer, 2 clients, 2 rounds) on random images; checkpoint after round 1."""
    from benchmark.pfl.trainer import PFLTrainer

    train, test, split = _pfl_data()
    trainer = PFLTrainer(_pfl_cfg(), train, test, split, 10, progress=False)
    trainer.run(checkpoint=ckpt, checkpoint_every=1)
    return {k: v.clone() for k, v in trainer.broadcast.items()}


def _zo_run(ckpt: Path):
    """FedMeZO (zo/run.py, through the round loop) on a tiny random BERT, 3 rounds, checkpointing its log."""
    transformers = pytest.importorskip("transformers")
    from benchmark.zo.mezo import parameters_sha256
    from benchmark.zo.run import ZORunSpec, run_zo
    from benchmark.zo.text_model import TextClassifier, TextTensors

    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=32, max_position_embeddings=32)  # fmt: skip
    model = TextClassifier(transformers.BertModel(cfg), 16, 3).eval()
    g = torch.Generator().manual_seed(6)
    ids, labels = torch.randint(1, 50, (16, 8), generator=g), torch.randint(0, 3, (16,), generator=g)
    data = TextTensors(ids, torch.ones_like(ids), labels)
    clients = [data.subset(torch.arange(0, 8)), data.subset(torch.arange(8, 16))]
    spec = ZORunSpec(dataset="toy", encoder="tiny", method="fedmezo", clients=2, alpha=1.0, k_shot=None, rounds=3,
                     lr=1e-2, seed=2)  # fmt: skip
    run_zo(spec, model, clients, data, checkpoint=ckpt, checkpoint_every=1, progress=False)
    return parameters_sha256(model)


def _pfl_model(tmp: Path, monkeypatch) -> Path:
    """The selected model a pfl training job writes (train_step, on random images); returns its record."""
    from benchmark.pfl import run

    train, test, split = _pfl_data()
    meta = {"data_checksum": {"train": "x", "test": "y"}, "partition_hash": "z", "num_classes": 10}
    monkeypatch.setattr(run, "load_run_data", lambda *a, **k: (train, test, split, meta))
    run.train_step(_pfl_cfg(), {"kind": "dirichlet", "beta": 0.5}, tmp / "seed0.json", device="cpu", progress=False)
    return tmp / "seed0.json"


@pytest.mark.parametrize("stack", ["fl", "pfl", "zo", "pfl_model"])
def test_case1_a_flipped_byte_in_a_checkpoint_is_refused_never_resumed(stack, tmp_path, tree_guard, monkeypatch):
    """Issue item 2: one byte flipped in the tensor payload of a real checkpoint of each stack (fl engine, fedbabu's
    trainer, FedMeZO's log; and the selected model a pfl evaluation loads) is one clear error naming the file and
    saying to delete it; nothing is resumed, nothing written. The clean checkpoint resumes bit-identically."""
    ckpt = tmp_path / "run.ckpt"
    if stack == "pfl_model":
        record = _pfl_model(tmp_path, monkeypatch)
        from benchmark.pfl.run import load_selected

        clean = load_selected(record)[1]
        model = tmp_path / "seed0.model.pt"
        flip_tensor_byte(model)
        guard = tree_guard(tmp_path)
        with pytest.raises(BenchmarkError) as err:
            load_selected(record)
        assert str(err.value) == (
            f"{model} is damaged or truncated (sha256 mismatch with {record}) -- delete {record} and re-run the "
            "training job (snakemake runs it again)"
        )
        guard.check()
        assert clean["broadcast"].keys() and all(isinstance(v, torch.Tensor) for v in clean["broadcast"].values())
        return
    run = {"fl": _fl_run, "pfl": _pfl_run, "zo": _zo_run}[stack]
    first = run(ckpt)
    clean = ckpt.read_bytes()
    flip_tensor_byte(ckpt)
    guard = tree_guard(tmp_path)
    with pytest.raises(BenchmarkError) as err:
        run(ckpt)
    fix = "delete it to restart the run from its first round"
    assert str(err.value) == f"checkpoint {ckpt} is corrupt (sha256 mismatch) -- {fix}"
    assert type(err.value).__name__ == "CorruptFileError"
    guard.check()  # nothing resumed, nothing written: the damaged file is left for the user to see
    ckpt.write_bytes(clean)
    again = run(ckpt)  # the clean checkpoint resumes, bit for bit
    if stack == "zo":
        assert again == first
    else:
        assert again.keys() == first.keys() and all(torch.equal(again[k], first[k]) for k in first)


def test_case1_a_checkpoint_without_checksum_is_refused(tmp_path, tree_guard):
    """A checkpoint written before checkpoints carried a checksum cannot be verified: refused, naming the file."""
    from benchmark.federated.checkpoint import load_checkpoint

    ckpt = tmp_path / "old.ckpt"
    torch.save({"format": "flb-fl-checkpoint", "version": 1, "round": 1}, ckpt)
    guard = tree_guard(tmp_path)
    with pytest.raises(BenchmarkError) as err:
        load_checkpoint(ckpt, {})
    assert str(err.value) == (
        f"checkpoint {ckpt} has no checksum (written by an older version of the suite, or not a checkpoint) and "
        "cannot be verified -- delete it to restart the run from its first round"
    )
    guard.check()


# ================================================================================ case 2: result files
@pytest.fixture
def toy_build(tmp_path, monkeypatch, runner_plugin):
    """A built toy target in ``tmp_path`` (plan, three run files with their sidecars, tidy, tables, checks) of the
    toy runner plug-in tests/plugins/integrity_toy_runner.py."""
    from benchmark.tables.execute import run_target
    from benchmark.workflow import load_config

    runner_plugin("integrity_toy_runner")
    write_toy_spec(tmp_path / "specs", "toy_table", "integrity_toy", methods=None)
    monkeypatch.chdir(tmp_path)
    run_target("toy_table", load_config(), tmp_path / "results", folder=tmp_path / "specs")
    assert cli.main(["table", "toy_table"]) == 0
    return tmp_path / "results"


@pytest.mark.parametrize("sidecar", [True, False], ids=["with-checksum", "old-file-without-checksum"])
@pytest.mark.parametrize("cut", ["mid-row", "row-boundary"])
def test_case2_a_truncated_run_csv_is_an_error_naming_it(toy_build, cut, sidecar, tree_guard, one_line_error, capsys):
    """Issue item 5: a run CSV cut in the middle of a row or at a row boundary is one error naming the file and
    the command that rebuilds it (with or without the checksum sidecar a file of an older version lacks); the
    target's tidy table, tables and checks are not rewritten. Intact, the same files assemble the same table."""
    results = toy_build
    checks = (results / "checks/toy_table.json").read_bytes()
    run = results / "runs/toy/toy_ncm/seed1.csv"
    good = run.read_bytes()
    header_end = good.index(b"\n") + 1
    written_with_sidecar = (run.parent / "seed1.csv.sha256").is_file()
    if not sidecar:
        for f in run.parent.glob("*.sha256"):
            f.unlink()
    run.write_bytes(good[: header_end + (len(good) - header_end) // 2] if cut == "mid-row" else good[:header_end])
    guard = tree_guard(results / "tidy", results / "checks", results / "tables", results / "runs")
    capsys.readouterr()
    assert cli.main(["table", "toy_table"]) == 2
    err = one_line_error()
    name = "results/runs/toy/toy_ncm/seed1.csv"
    why = {
        (True, "mid-row"): "is damaged or truncated (sha256 mismatch with seed1.csv.sha256; if you edited it on "
        "purpose, delete seed1.csv.sha256)",
        (True, "row-boundary"): "is damaged or truncated (sha256 mismatch with seed1.csv.sha256; if you edited it "
        "on purpose, delete seed1.csv.sha256)",
        (False, "mid-row"): "is truncated: its last line ends without a newline",
        (False, "row-boundary"): "has 0 accuracy rows of method 'toy_ncm' (one expected, as in the cell's other "
        "run files)",
    }[sidecar, cut]
    prefix = "run file " if (sidecar, cut) == (False, "row-boundary") else ""
    assert err == f"flb: error: {prefix}{name} {why} -- delete it and rerun `snakemake --cores all toy_table` " \
                  "(its job runs again)"  # fmt: skip
    guard.check()
    assert good.count(b"\n") == 2 and written_with_sidecar  # a header and one row; the suite wrote a sidecar
    run.write_bytes(good)
    if sidecar:
        assert cli.main(["table", "toy_table"]) == 0
        assert (results / "checks/toy_table.json").read_bytes() == checks


def test_case2_result_files_carry_a_checksum_and_old_ones_are_checked_for_structure(
    tmp_path, monkeypatch, tree_guard, one_line_error, capsys
):
    """The primitive: a tidy CSV, a curve and a run record are written with ``<file>.sha256``; read back they are
    what pandas / json read; a tidy table cut mid-row is one error of ``flb collect`` naming it (nothing
    written), a record with one digit changed is refused, a damaged line of an old file (no sidecar) is named
    with its line."""
    import pandas as pd

    from benchmark.fl.jobs import CURVE_COLUMNS, read_curve, write_curve
    from benchmark.tidy import make_row, read_tidy, write_tidy

    monkeypatch.chdir(tmp_path)
    tidy = tmp_path / "t.csv"
    write_tidy([make_row(method="m", metric="accuracy", value=1.5, seed=s, note='x, "y"') for s in (0, 1)], tidy)
    pd.testing.assert_frame_equal(read_tidy(tidy), pd.read_csv(tidy))
    good = tidy.read_bytes()
    tidy.write_bytes(good[: len(good) - 30])
    guard = tree_guard(tmp_path)
    capsys.readouterr()
    assert cli.main(["collect", "t.csv", "--out", "all.csv"]) == 2
    assert one_line_error() == (
        "flb: error: t.csv is damaged or truncated (sha256 mismatch with t.csv.sha256; if you edited it on purpose, "
        "delete t.csv.sha256) -- delete it and rerun the command that wrote it (for a build, `snakemake --cores all "
        "<target>` runs its job again)"
    )
    guard.check()
    assert re.fullmatch(r"[0-9a-f]{64}  t\.csv\n", (tmp_path / "t.csv.sha256").read_text())
    from benchmark.io import atomic_write_json, read_verified_json

    record = tmp_path / "seed0.json"
    atomic_write_json(record, {"final_accuracy": 61.25}, checksum=True)
    assert read_verified_json(record) == {"final_accuracy": 61.25}
    record.write_text(record.read_text().replace("61.25", "91.25"))
    with pytest.raises(BenchmarkError, match=r"seed0\.json is damaged or truncated \(sha256 mismatch"):
        read_verified_json(record)
    curve = tmp_path / "c.csv"
    frame = pd.DataFrame([[1, "lp", 50.0, 1.0, 1.0, 8, 8, 10, 0.1, "lp", 0]], columns=list(CURVE_COLUMNS))
    write_curve(frame, curve)
    assert (tmp_path / "c.csv.sha256").is_file()
    assert read_curve(curve)["downlink_bytes"].tolist() == [8]
    (tmp_path / "c.csv.sha256").unlink()
    curve.write_text(curve.read_text().replace(",8,8,", ",8,oops,"))
    with pytest.raises(BenchmarkError, match=r"c\.csv line 2: field 'downlink_bytes' is 'oops', not a number"):
        read_curve(curve)


# ================================================================================ case 3: file modes
@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_case3_outputs_get_the_mode_of_a_plain_open(umask, tmp_path):
    """Every output (text, JSON with its sidecar, tidy CSV, checkpoint, feature cache entry) gets 0o666 & ~umask,
    as ``open()`` would give it, not mkstemp's 0600."""
    from benchmark.features.cache import FeatureCache, FeatureKey
    from benchmark.federated.checkpoint import save_checkpoint
    from benchmark.io import atomic_write_json, atomic_write_text
    from benchmark.models.weights import WeightsIdentity
    from benchmark.tidy import make_row, write_tidy

    before = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "a.md", "x\n")
        atomic_write_json(tmp_path / "b.json", {"x": 1})
        write_tidy([make_row(method="m", metric="accuracy", value=1.0)], tmp_path / "c.csv")
        save_checkpoint(tmp_path / "d.ckpt", {"round": 1})
        key = FeatureKey("toy", "train", "0" * 64, "b", WeightsIdentity("substitute", "w", "1" * 64), "{}", "fp32")
        FeatureCache(tmp_path / "cache").put(key, np.zeros((2, 3)), np.zeros(2), {})
        open(tmp_path / "plain", "w").close()
    finally:
        os.umask(before)
    want = 0o666 & ~umask
    modes = {p.name: oct(p.stat().st_mode & 0o777) for p in tmp_path.rglob("*") if p.is_file()}
    assert modes == dict.fromkeys(modes, oct(want)), modes
    assert len(modes) == 9  # a.md b.json c.csv(.sha256) d.ckpt <key>.safetensors <key>.json(.sha256) plain


# ================================================================================ case 4: killed writers
KILLED_WRITER = """
import os, signal, sys
import pandas as pd
from benchmark.io import atomic_write_json
from benchmark.tidy import make_row, write_tidy

def half_then_killed(self, path, *a, **k):
    open(path, "w").write("paper,table,cell,da")
    os.kill(os.getpid(), signal.SIGKILL)

pd.DataFrame.to_csv = half_then_killed
if sys.argv[1] == "tidy":
    write_tidy([make_row(method="m", metric="accuracy", value=2.0, seed=0)], sys.argv[2])
else:
    import benchmark.io as bio
    real = bio.Path.write_text
    def half(self, text, *a, **k):
        real(self, text[:5])
        os.kill(os.getpid(), signal.SIGKILL)
    bio.Path.write_text = half
    atomic_write_json(sys.argv[2], {"cells": [2.0]})
"""


@pytest.mark.parametrize("kind", ["tidy", "checks"])
def test_case4_a_killed_writer_leaves_nothing_a_glob_or_the_next_run_picks_up(kind, tmp_path):
    """A writer SIGKILLed mid-write leaves only its temporary file: no result glob (``*.csv``, ``*.json``, rglob)
    sees it, the previous result is intact, the next write of the same file removes it and the result is
    right. The temporary file of a live writer (locked) is left alone."""
    import fcntl

    from benchmark.io import atomic_path, atomic_write_json
    from benchmark.tidy import make_row, read_tidy, write_tidy

    folder = tmp_path / "results" / kind
    dest = folder / ("t.csv" if kind == "tidy" else "t.json")
    write = (lambda v: write_tidy([make_row(method="m", metric="accuracy", value=v, seed=0)], dest)) if kind == "tidy" \
        else (lambda v: atomic_write_json(dest, {"cells": [v]}))  # fmt: skip
    read = (lambda: float(read_tidy(dest)["value"].iloc[0])) if kind == "tidy" else (
        lambda: json.loads(dest.read_text())["cells"][0])
    write(1.0)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, kind, str(dest)], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    left = _temps(folder)
    assert left, "the killed writer left no temporary file: the test did not kill it mid-write"
    pattern = "*.csv" if kind == "tidy" else "*.json"
    assert [p.name for p in folder.glob(pattern)] == [dest.name]  # what collects results sees only the result
    assert [p.name for p in (tmp_path / "results").rglob(pattern)] == [dest.name]
    assert read() == 1.0  # the previous result is intact
    with atomic_path(folder / "other.txt") as tmp:  # a live writer of another file: its temp is not touched
        tmp.write_text("x")
    live = folder / f".{dest.name}.livewrit.tmp"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        write(3.0)
        assert _temps(folder) == [live.name]  # the killed writer's temp is gone, the live one's kept
    finally:
        os.close(fd)
    live.rmdir()
    assert read() == 3.0 and _temps(folder) == []


# ================================================================================ case 5: disk full
class SafetensorError(Exception):
    """What safetensors raises around an OS error (its Rust I/O error, in words)."""


def _enospc(path: object = None) -> OSError:
    return OSError(errno.ENOSPC, "No space left on device", None if path is None else str(path))


@pytest.mark.parametrize("what", ["tidy", "features", "checkpoint"])
def test_case5_a_full_disk_is_one_error_and_nothing_half_written_stays(what, tmp_path, monkeypatch, tree_guard,
                                                                      one_line_error, capsys):  # fmt: skip
    """Disk full while writing a tidy table (``flb collect``), a feature cache entry and a checkpoint: one error
    naming the file and saying to free space and rerun; the previous file is intact and no partial or
    temporary file is left."""
    import pandas as pd
    import safetensors.numpy

    from benchmark.features.cache import FeatureCache, FeatureKey
    from benchmark.federated.checkpoint import save_checkpoint
    from benchmark.models.weights import WeightsIdentity
    from benchmark.tidy import make_row, write_tidy

    monkeypatch.chdir(tmp_path)
    if what == "tidy":
        write_tidy([make_row(method="m", metric="accuracy", value=1.0, seed=0)], "results/runs/a.csv")
        write_tidy([make_row(method="m", metric="accuracy", value=9.0, seed=0)], "results/tidy/t.csv")
        dest = Path("results/tidy/t.csv")

        def fail(self, path, *a, **k):
            Path(path).write_text("paper,ta")
            raise _enospc(path)

        monkeypatch.setattr(pd.DataFrame, "to_csv", fail)
    elif what == "features":
        cache = FeatureCache(tmp_path / "cache")
        key = FeatureKey("toy", "train", "0" * 64, "b", WeightsIdentity("substitute", "w", "1" * 64), "{}", "fp32")
        dest = cache.paths(key)[0]
        dest.parent.mkdir(parents=True)

        def fail(tensors, path, *a, **k):
            Path(path).write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
            raise SafetensorError(
                'Error while serializing: I/O error: No space left on device (os error 28) at path "x"')

        monkeypatch.setattr(safetensors.numpy, "save_file", fail)
    else:
        dest = tmp_path / "run.ckpt"
        save_checkpoint(dest, {"round": 1})

        def fail(fd):
            raise _enospc()

        monkeypatch.setattr(os, "fsync", fail)  # a full disk is also reported when the data are flushed
    guard = tree_guard(tmp_path)
    capsys.readouterr()
    if what == "tidy":
        assert cli.main(["collect", "results/runs/a.csv", "--out", str(dest)]) == 2
        err = one_line_error()
    else:
        with pytest.raises(BenchmarkError) as exc:
            if what == "features":
                cache.put(key, np.zeros((2, 3)), np.zeros(2), {})
            else:
                save_checkpoint(dest, {"round": 2})
        err = f"flb: error: {exc.value}"
    folder = dest.parent
    assert err == (
        f"flb: error: no space left on the device while writing {dest} -- free space on the disk that holds "
        f"{folder}, then rerun the same command (nothing half-written was kept)"
    )
    guard.check()
    assert _temps(tmp_path) == []


# ================================================================================ case 6: read-only results/
@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
@pytest.mark.parametrize("exists", [True, False], ids=["folder-exists", "folder-to-create"])
def test_case6_a_read_only_results_folder_is_one_error_naming_it(code, exists, tmp_path, monkeypatch, tree_guard,
                                                                 one_line_error, capsys):  # fmt: skip
    """Writing into a read-only (EROFS) or unwritable (EACCES) ``results/``: one error naming the folder and
    saying to make it writable; nothing is written."""
    import tempfile

    from benchmark.tidy import make_row, write_tidy

    monkeypatch.chdir(tmp_path)
    write_tidy([make_row(method="m", metric="accuracy", value=1.0, seed=0)], "results/runs/a.csv")
    if exists:
        Path("results/tidy").mkdir()
    guard = tree_guard(tmp_path)

    def refused(*a, dir=None, **k):
        raise OSError(code, os.strerror(code), str(dir))

    def no_mkdir(path, *a, **k):
        if os.path.isdir(path):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    monkeypatch.setattr(tempfile, "mkdtemp", refused)
    monkeypatch.setattr(os, "mkdir", no_mkdir)
    capsys.readouterr()
    assert cli.main(["collect", "results/runs/a.csv", "--out", "results/tidy/t.csv"]) == 2
    folder = "results/tidy" if exists else "results"
    why = "is on a read-only file system" if code == errno.EROFS else "is not writable (permission denied)"
    assert one_line_error() == (
        f"flb: error: cannot write results/tidy/t.csv: the folder {folder} {why} -- make {folder} writable (or "
        "run from a copy of the project you can write to), then rerun the same command"
    )
    guard.check()
