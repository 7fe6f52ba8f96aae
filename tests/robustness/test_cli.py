"""The command line under faults and misuse (issue 23): every failure is one line, no traceback unless
``--debug``; a closed pipe ends quietly; a bad extraction device, an ``--out`` that is a folder and a cache
folder that is a file are refused before any work; a long extraction reports its progress and time left.

Each test also checks that nothing else changed: the test's own folder and the checkout's README, docs/ and
expected/ (``tree_guard``).
"""

from __future__ import annotations

import errno
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from benchmark import pipeline
from benchmark.cli import main
from benchmark.data.registry import DatasetSplit

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = (ROOT / "README.md", ROOT / "docs", ROOT / "expected")

EXTRACT = ["extract", "--dataset", "cifar10", "--split", "train", "--backbone", "squeezenet1_1",
           "--weights", "random", "--preprocess", "fedbabu_cifar10"]  # fmt: skip


def _toy_split(n: int = 4, split: str = "train") -> DatasetSplit:
    images = np.random.default_rng(0).integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8)
    return DatasetSplit("toy", split, np.arange(n) % 2, ("a", "b"), "toy-checksum", images=images)


@pytest.fixture()
def toy_data(monkeypatch) -> list[str]:
    """``flb extract`` reads a 4-image toy split instead of CIFAR; the list records each split read."""
    reads: list[str] = []

    def load(name, split, root=None):
        reads.append(f"{name}/{split}")
        return _toy_split(split=split)

    monkeypatch.setattr(pipeline, "load_dataset", load)
    return reads


def _stderr(capsys) -> str:
    return capsys.readouterr().err.strip()


# ------------------------------------------------------------------------------------------------ case 1
def _collect_fault(monkeypatch, exc: BaseException) -> None:
    def fail(*a, **k):
        raise exc

    monkeypatch.setattr(pipeline, "collect_step", fail)


def _faults(tmp: Path) -> list[tuple[str, BaseException, int, str]]:
    out, results = tmp / "out" / "all.csv", tmp / "results"
    again = "free space on that disk (`df -h` shows it) or point the output elsewhere, then rerun the same command; " \
            "outputs are written under a temporary name and renamed only when complete, so no half-written one was kept"  # fmt: skip
    return [
        ("enospc", OSError(errno.ENOSPC, "No space left on device", str(out)), 2,
         f"flb: error: no space left on the device while writing {out} -- free space on the disk that holds "
         f"{tmp}, then rerun the same command (nothing half-written was kept)"),
        ("enospc-unnamed", OSError(errno.ENOSPC, "No space left on device"), 2,
         f"flb: error: disk full: no space left on the device to write --out {out} -- {again}"),
        ("eacces", PermissionError(errno.EACCES, "Permission denied", str(results / "tidy")), 2,
         f"flb: error: cannot access {results / 'tidy'}: permission denied -- make {results} readable and "
         "writable for this user, or point the output (--out, FLB_CACHE_DIR) at a folder that is"),
        ("erofs", OSError(errno.EROFS, "Read-only file system", str(results / "tidy" / "x.csv")), 2,
         f"flb: error: cannot write {results / 'tidy' / 'x.csv'}: the folder {tmp} is on a read-only file "
         f"system -- make {tmp} writable (or run from a copy of the project you can write to), then rerun the "
         "same command"),
        ("enotdir", NotADirectoryError(errno.ENOTDIR, "Not a directory", str(tmp / "afile" / "x.csv")), 2,
         f"flb: error: {tmp / 'afile'} is a file where a folder is needed (for {tmp / 'afile' / 'x.csv'}) -- "
         f"move or delete the file {tmp / 'afile'}, or pass another path"),
        ("eisdir", IsADirectoryError(errno.EISDIR, "Is a directory", str(results)), 2,
         f"flb: error: {results} is a folder where a file is needed -- pass the path of a file, or move the "
         "folder away"),
        ("internal", RuntimeError("boom\n  on two lines"), 70,
         "flb: error: internal error RuntimeError: boom on two lines -- rerun with --debug for the traceback "
         "and report it"),
    ]  # fmt: skip


@pytest.mark.parametrize("fault", ["enospc", "enospc-unnamed", "eacces", "erofs", "enotdir", "eisdir", "internal"])
def test_no_traceback_unless_debug(fault, tmp_path, monkeypatch, capsys, tree_guard) -> None:
    """Any failure inside a subcommand is one line (the path and what to do), exit != 0; ``--debug`` anywhere
    on the line, or FLB_DEBUG=1, adds the traceback above that same line."""
    monkeypatch.delenv("FLB_DEBUG", raising=False)
    (tmp_path / "afile").write_text("")
    (tmp_path / "in.csv").write_text("a\n1\n")
    _, exc, code, line = next(f for f in _faults(tmp_path) if f[0] == fault)
    _collect_fault(monkeypatch, exc)
    argv = ["collect", str(tmp_path / "in.csv"), "--out", str(tmp_path / "out" / "all.csv")]
    guard = tree_guard(tmp_path, *CHECKOUT)

    assert main(argv) == code
    assert _stderr(capsys) == line
    assert main(["--debug", *argv]) == code
    err = _stderr(capsys)
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1] == line
    assert main([*argv, "--debug"]) == code and _stderr(capsys).splitlines()[-1] == line
    monkeypatch.setenv("FLB_DEBUG", "1")
    assert main(argv) == code
    err = _stderr(capsys)
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1] == line
    guard.check()


def test_no_traceback_unless_debug_disk_full_while_writing(tmp_path, monkeypatch, capsys, tree_guard) -> None:
    """Disk full half-way through a real write (``flb collect`` -> the tidy CSV; the OS names no file): one
    line naming the file being written, and nothing half-written left behind."""
    from benchmark.tidy import make_row, write_tidy

    monkeypatch.delenv("FLB_DEBUG", raising=False)
    write_tidy([make_row(dataset="d", method="m", seed=0, metric="accuracy", value=1.0)], tmp_path / "in.csv")
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "all.csv"

    def full(self, path, *a, **k):
        Path(path).write_text("dataset,mod")  # part of the header, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    guard = tree_guard(tmp_path, *CHECKOUT)
    assert main(["collect", str(tmp_path / "in.csv"), "--out", str(out)]) == 2
    assert _stderr(capsys) == (  # the atomic writer names the file (benchmark.io.disk_full_error)
        f"flb: error: no space left on the device while writing {out} -- free space on the disk that holds "
        f"{out.parent}, then rerun the same command (nothing half-written was kept)"
    )
    guard.check()  # no all.csv, no temporary file beside it


def test_no_traceback_unless_debug_in_applications(tmp_path, monkeypatch, capsys, tree_guard) -> None:
    """``flb <application>`` (benchmark.apps) runs under the same handler."""
    import benchmark.apps.plots as plots

    monkeypatch.delenv("FLB_DEBUG", raising=False)

    def broken(argv):
        raise KeyError("curve")

    monkeypatch.setattr(plots, "main", broken)
    guard = tree_guard(tmp_path, *CHECKOUT)
    assert main(["plot", "A=x.csv", "--out", str(tmp_path / "f.png")]) == 70
    assert _stderr(capsys) == (
        "flb: error: internal error KeyError: 'curve' -- rerun with --debug for the traceback and report it"
    )
    assert main(["--debug", "plot", "A=x.csv"]) == 70 and "Traceback" in _stderr(capsys)
    guard.check()


def test_no_traceback_unless_debug_closed_pipe(tmp_path, monkeypatch, capsys, tree_guard) -> None:
    """``flb data list | head``: the reader goes away; flb ends quietly (exit 141, as for SIGPIPE), no
    BrokenPipeError traceback and no 'Exception ignored' message at exit. A broken pipe that is not stdout
    (a child process) is an error like any other."""
    guard = tree_guard(tmp_path, *CHECKOUT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FLB_OFFLINE": "1"}
    env.pop("FLB_DEBUG", None)
    (tmp_path / "data").mkdir()  # an existing (empty) data root: a named one that does not exist is an error
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmark.cli", "data", "list", "--data-root", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    proc.stdout.close()  # head has read its lines and exited before flb writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""

    import benchmark.cli as cli

    monkeypatch.delenv("FLB_DEBUG", raising=False)
    monkeypatch.setattr(cli, "_stdout_gone", lambda: False)
    _collect_fault(monkeypatch, BrokenPipeError(errno.EPIPE, "Broken pipe"))
    assert main(["collect", "in.csv", "--out", str(tmp_path / "all.csv")]) == 70
    assert _stderr(capsys) == ("flb: error: internal error BrokenPipeError: [Errno 32] Broken pipe -- rerun with "
                               "--debug for the traceback and report it")  # fmt: skip
    guard.check()


# ------------------------------------------------------------------------------------------------ case 2
@pytest.mark.parametrize(("device", "cuda", "line"), [
    ("gpu", None, "flb: error: unknown device 'gpu' (--device, or --config device=... in the workflow) -- use "
                  "one of: cpu, cuda, cuda:N (N a GPU index, e.g. cuda:0), mps, or auto; did you mean 'cuda'?"),
    ("cdua", None, "flb: error: unknown device 'cdua' (--device, or --config device=... in the workflow) -- use "
                   "one of: cpu, cuda, cuda:N (N a GPU index, e.g. cuda:0), mps, or auto; did you mean 'cuda'?"),
    ("cuda", 0, f"flb: error: device 'cuda' (--device, or --config device=... in the workflow) names a CUDA GPU, "
                f"but torch sees none here (torch {torch.__version__}, "
                f"{'built with CUDA ' + torch.version.cuda if torch.version.cuda else 'a CPU-only build'}) -- run on a "
                "machine with an NVIDIA GPU and a CUDA build of torch, or leave the device unset (or set cpu) to run "
                "on the CPU"),
    ("cuda:3", 2, "flb: error: device 'cuda:3' (--device, or --config device=... in the workflow): torch sees 2 "
                  "CUDA GPU(s), cuda:0 to cuda:1 -- name one of those (check CUDA_VISIBLE_DEVICES), or use cuda "
                  "for the first"),
])  # fmt: skip
def test_unknown_extraction_device(device, cuda, line, tmp_path, monkeypatch, capsys, toy_data, tree_guard) -> None:
    """A device that is not one (``gpu``: the workflow passes ``--config device=...`` as ``--device``) or a
    GPU torch does not see: one line listing the valid devices, before any data is read."""
    if cuda is not None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda)
    monkeypatch.chdir(tmp_path)
    guard = tree_guard(tmp_path, *CHECKOUT)
    rc = main([*EXTRACT, "--device", device, "--out", str(tmp_path / "train.json")])
    assert (rc, _stderr(capsys)) == (2, line)
    assert toy_data == []  # no data read, nothing extracted
    guard.check()


# ------------------------------------------------------------------------------------------------ case 3
def _out_commands(tmp: Path, folder: Path) -> dict[str, list[str]]:
    f = str(folder)
    ptr = ["--train", "tr.json", "--test", "te.json", "--partition", "p.json"]
    run = ["fl-run", "--protocol", "p", "--method", "lp", *ptr, "--seed", "0"]
    return {
        "extract": [*EXTRACT, "--out", f],
        "partition": ["partition", "--dataset", "cifar10", "--scheme", "iid", "--seed", "0", "--out", f],
        "closed-form": ["closed-form", *ptr, "--out", f],
        "fl-run": [*run, "--out", f],
        "fl-run --curve": [*run, "--out", str(tmp / "x.csv"), "--curve", f],
        "fl-run --record": [*run, "--out", str(tmp / "x.csv"), "--record", f],
        "collect": ["collect", "a.csv", "--out", f],
        "data fetch --marker": ["data", "fetch", "cifar10", "--marker", f],
    }


@pytest.mark.parametrize("command", ["extract", "partition", "closed-form", "fl-run", "fl-run --curve",
                                     "fl-run --record", "collect", "data fetch --marker"])  # fmt: skip
def test_out_is_a_directory(command, tmp_path, monkeypatch, capsys, tree_guard) -> None:
    """An output option naming an existing folder is refused before any work is done, naming it."""
    import benchmark.data.download as download
    import benchmark.fl.jobs as fl_jobs

    def work(*a, **k):
        raise AssertionError("work started")

    for mod, name in [(pipeline, "extract_step"), (pipeline, "partition_step"), (pipeline, "closed_form_step"),
                      (pipeline, "collect_step"), (fl_jobs, "fl_run_step"), (download, "fetch_dataset")]:  # fmt: skip
        monkeypatch.setattr(mod, name, work)
    folder = tmp_path / "results" / "features"
    (folder / "kept").mkdir(parents=True)
    (folder / "kept" / "a.json").write_text("{}")
    option = command.split()[-1] if command.split()[-1].startswith("--") else "--out"
    guard = tree_guard(tmp_path, *CHECKOUT)
    assert main(_out_commands(tmp_path, folder)[command]) == 2
    assert _stderr(capsys) == (
        f"flb: error: {option} {folder} is an existing folder, but {option} names the file to write -- pass the "
        f"path of a file (e.g. {folder / '<name>'}); the folder was left as it is"
    )
    guard.check()


# ------------------------------------------------------------------------------------------------ case 4
@pytest.mark.parametrize("how", ["--cache-dir", "FLB_CACHE_DIR", "default", "under a file"])
def test_cache_dir_is_a_file(how, tmp_path, monkeypatch, capsys, toy_data, tree_guard) -> None:
    """The feature cache folder (--cache-dir / FLB_CACHE_DIR / results/cache) being a file, or under one:
    one line naming it and the setting, before any data is read."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLB_CACHE_DIR", raising=False)
    (tmp_path / "results").mkdir()
    cache = tmp_path / "results" / "cache"
    cache.write_text("not a folder")
    argv = [*EXTRACT, "--device", "cpu", "--out", str(tmp_path / "train.json")]
    where, path, fix = "set by --cache-dir", cache, "pass a folder to --cache-dir"
    if how == "--cache-dir":
        argv += ["--cache-dir", str(cache)]
    elif how == "FLB_CACHE_DIR":
        monkeypatch.setenv("FLB_CACHE_DIR", str(cache))
        where, fix = "set by FLB_CACHE_DIR", "point FLB_CACHE_DIR at a folder"
    elif how == "default":
        where, path, fix = "the default", Path("results/cache"), "set FLB_CACHE_DIR (or --cache-dir) to a folder"
    else:
        argv += ["--cache-dir", str(cache / "sub")]
    guard = tree_guard(tmp_path, *CHECKOUT)
    assert main(argv) == 2
    problem = "is a file, not a folder" if how != "under a file" else f"cannot be created: {cache} is a file, not a folder"
    shown = cache / "sub" if how == "under a file" else path
    assert _stderr(capsys) == (
        f"flb: error: the feature cache folder ({where}) {shown} {problem} -- move or delete that file, or {fix}"
    )
    assert toy_data == []
    guard.check()


# ------------------------------------------------------------------------------------------------ case 6
def test_extraction_progress_shows_time_left(tmp_path, monkeypatch, capsys, toy_data, tree_guard) -> None:
    """Extraction reports images done / total, img/s and the time left: plain lines when stderr is not a
    terminal (a Snakemake log), a start line, one every ``every_s`` seconds and a last one with the time taken."""
    guard = tree_guard(*CHECKOUT)
    # through the command line: the lines reach stderr (the rule's log), the summary stdout
    monkeypatch.chdir(tmp_path)
    assert main([*EXTRACT, "--device", "cpu", "--out", str(tmp_path / "train.json"),
                 "--cache-dir", str(tmp_path / "cli-cache")]) == 0  # fmt: skip
    out = capsys.readouterr()
    assert re.search(r"^\[extract toy/train squeezenet1_1\] 0/4 img \(0%\)  - img/s  ETA --:--:--$", out.err, re.M)
    assert re.search(r"^\[extract toy/train squeezenet1_1\] 4/4 img \(100%\)  \d+\.\d img/s  done in \d\d:\d\d:\d\d$",
                     out.err, re.M)  # fmt: skip
    assert "cifar10/train squeezenet1_1: 4 x 512" in out.out

    from benchmark.features.cache import FeatureCache
    from benchmark.features.extract import extract_features
    from benchmark.features.preprocess import get_preprocess
    from benchmark.federated.progress import count_line, format_eta

    assert format_eta(824.8) == "00:13:45" and format_eta(float("inf")) == "--:--:--"
    assert format_eta(3 * 3600 + 7) == "03:00:07"
    assert count_line("extract cifar10/train squeezenet1_1", 12800, 50000, 45.1, "img") == (
        "[extract cifar10/train squeezenet1_1] 12800/50000 img (25%)  45.1 img/s  ETA 00:13:45"
    )
    assert count_line("x", 0, 10, 0.0, "img") == "[x] 0/10 img (0%)  - img/s  ETA --:--:--"
    assert count_line("x", 10, 10, 2.0, "img", elapsed=5.0) == "[x] 10/10 img (100%)  2.0 img/s  done in 00:00:05"

    stream = io.StringIO()  # a line after every batch (every_s=0): start, 2/6, 4/6, the end
    extract_features(_toy_split(6), "squeezenet1_1", "random", get_preprocess("fedbabu_cifar10"), batch_size=2,
                     device="cpu", cache=FeatureCache(tmp_path / "cache"), progress_stream=stream,
                     progress_every_s=0.0)  # fmt: skip
    lines = stream.getvalue().splitlines()
    assert len(lines) == 4, lines
    pat = r"\[extract toy/train squeezenet1_1\] {}/6 img \({}%\)  \d+\.\d img/s  ETA \d\d:\d\d:\d\d"
    assert re.fullmatch(r"\[extract toy/train squeezenet1_1\] 0/6 img \(0%\)  - img/s  ETA --:--:--", lines[0])
    assert re.fullmatch(pat.format(2, 33), lines[1]) and re.fullmatch(pat.format(4, 66), lines[2])
    assert re.fullmatch(r"\[extract toy/train squeezenet1_1\] 6/6 img \(100%\)  \d+\.\d img/s  done in \d\d:\d\d:\d\d",
                        lines[3])  # fmt: skip
    guard.check()
