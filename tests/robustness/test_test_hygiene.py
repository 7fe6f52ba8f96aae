"""The test suite keeps its own promises (issue 23): the README's test command is green for a user who follows
it literally (with or without FLB_DATA_ROOT / FLB_WEIGHTS_DIR, beside ../shared or not), and the tests write
only to temporary folders: a run that leaves a file in the checkout fails (tests/conftest.py's guard).

The guard and the real-data fixture are exercised in a nested pytest run over a throw-away git checkout that
holds a copy of tests/conftest.py, so that nothing here can write into this checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = (ROOT / "README.md", ROOT / "docs", ROOT / "expected")

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git (the guard reads git status)")


def _checkout(tmp: Path, tests: dict[str, str]) -> Path:
    """A git checkout with a tracked README.md, tests/conftest.py (this suite's) and ``tests``."""
    repo = tmp / "checkout"
    (repo / "tests").mkdir(parents=True)
    (repo / "README.md").write_text("readme\n")
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / ".gitignore").write_text("/results/\n/.cache/\n")
    shutil.copyfile(ROOT / "tests" / "conftest.py", repo / "tests" / "conftest.py")
    for name, text in tests.items():
        (repo / "tests" / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    return repo


def _pytest(repo: Path, env: dict[str, str] | None = None, *args: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FLB_", "PYTEST_"))}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args, str(repo / "tests")],
        capture_output=True, text=True, cwd=repo, timeout=120,
        env={**base, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", **(env or {})},
    )  # fmt: skip


WRITERS = '''
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_leaves_a_partition() -> None:
    (REPO / "results" / "partitions").mkdir(parents=True)
    (REPO / "results" / "partitions" / "seed0.json").write_text("{}")


def test_leaves_snakemake_state() -> None:
    (REPO / ".snakemake" / "log").mkdir(parents=True)
    (REPO / ".snakemake" / "log" / "run.log").write_text("log")


def test_changes_a_tracked_file() -> None:
    with open(REPO / "README.md", "a") as fh:
        fh.write("more\\n")


def test_writes_a_temporary_folder(tmp_path) -> None:
    (tmp_path / "fine.txt").write_text("fine")
'''

CLEAN = '''
def test_writes_a_temporary_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "fine.txt").write_text("fine")
'''


def test_tests_write_only_to_temp_dirs(tmp_path, tree_guard) -> None:
    """A run whose tests write into the checkout fails, listing each file; a run that writes only to
    temporary folders passes (and an untracked results/ present before the run is not blamed on it)."""
    guard = tree_guard(*CHECKOUT)
    repo = _checkout(tmp_path, {"test_writers.py": WRITERS})
    run = _pytest(repo)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "4 passed" in run.stdout
    listed = [ln for ln in run.stdout.splitlines() if ln.endswith((": added", ": changed", ": removed"))]
    assert listed == [
        ".snakemake/log/run.log: added", "README.md: changed", "results/partitions/seed0.json: added"
    ], run.stdout[-3000:]
    assert f"the tests wrote into the checkout {repo}" in run.stdout

    clean = _checkout(tmp_path / "clean", {"test_clean.py": CLEAN})
    (clean / "results").mkdir()
    (clean / "results" / "built-before.csv").write_text("x")  # a user's earlier build: not the tests' doing
    run = _pytest(clean)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:]
    assert "wrote into the checkout" not in run.stdout
    guard.check()


PREPARE = '''
import argparse
import sys
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--out")
out = Path(ap.parse_args().out)
for rel in ("cifar-10-batches-py/test_batch", "cifar-100-python/test"):
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    (out / rel).write_text("fake")
with open(Path(__file__).parent / "calls.txt", "a") as fh:
    fh.write("called\\n")
'''

USES_DATA = '''
def test_uses_real_data(real_data_root) -> None:
    print("ROOT", real_data_root)
    assert (real_data_root / "cifar-100-python" / "test").read_text() == "fake"
'''


def test_real_data_is_rebuilt_outside_the_checkout(tmp_path, tree_guard) -> None:
    """Beside ../shared and without FLB_DATA_ROOT, the CIFAR files are rebuilt once into the per-user cache
    (FLB_TEST_DATA_CACHE here), never into the checkout, and reused by the next run; with neither, the
    real-data tests are skipped with the reason and the run is green."""
    guard = tree_guard(*CHECKOUT)
    shared = tmp_path / "shared" / "data"
    shared.mkdir(parents=True)
    (shared / "prepare.py").write_text(PREPARE)
    (shared / "MANIFEST.sha256").write_text(f"{'0' * 64}  cifar-100-python/test\n")
    repo = _checkout(tmp_path, {"test_data.py": USES_DATA})
    env = {"FLB_SHARED_DATA": str(shared), "FLB_TEST_DATA_CACHE": str(tmp_path / "user-cache" / "test-data")}
    for _ in range(2):
        run = _pytest(repo, env, "-s")
        assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
        assert f"ROOT {tmp_path / 'user-cache' / 'test-data'}" in run.stdout
    assert (shared / "calls.txt").read_text() == "called\n"  # rebuilt once, then reused
    assert not (repo / ".cache").exists()
    assert sorted(p.name for p in (tmp_path / "user-cache").iterdir()) == ["test-data"]  # no half-built folder

    run = _pytest(repo, {"FLB_SHARED_DATA": str(tmp_path / "nowhere")})
    assert run.returncode == 0 and "1 skipped" in run.stdout, run.stdout[-3000:]
    assert "no real data: set FLB_DATA_ROOT to a folder with the CIFAR pickles, or provide" in run.stdout
    guard.check()


def _suite_conftest():
    """tests/conftest.py as a module of its own (``import conftest`` may name tests/bench/conftest.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("flb_tests_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_test_command_is_green_as_written(tmp_path, monkeypatch, real_data_root, tree_guard) -> None:
    """A real-data test that needs the weights skips (never fails) when FLB_WEIGHTS_DIR is unset and there is
    no ../shared (the Table A.2 test failed), and the README's paragraph says what the fixtures do."""
    guard = tree_guard(*CHECKOUT)
    base = {k: v for k, v in os.environ.items() if k not in ("FLB_WEIGHTS_DIR", "FLB_SHARED_DATA")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
         "tests/test_tables.py::test_thesis_table_a2_runs_like_legate2023_table5"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**base, "FLB_DATA_ROOT": str(real_data_root), "FLB_SHARED_DATA": str(tmp_path / "no-shared"),
             "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0 and "1 skipped" in run.stdout, run.stdout[-3000:]
    assert "no substitute weights: set FLB_WEIGHTS_DIR" in run.stdout

    readme = (ROOT / "README.md").read_text()
    assert "rebuilds CIFAR-10/100 from\n`../shared/data` once (about 30 s) into `~/.cache/flb/test-data`" in readme
    assert "elsewhere the tests that need them are skipped with the reason" in readme
    assert "The tests write only to temporary folders: a\nrun that leaves a file in the checkout fails" in readme
    monkeypatch.delenv("FLB_TEST_DATA_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert _suite_conftest().real_data_cache() == Path.home() / ".cache" / "flb" / "test-data"
    guard.check()
