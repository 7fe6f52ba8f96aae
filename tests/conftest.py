"""Shared fixtures: where the real data and weights are, an offline default, and the checkout guard.

Real data (``real_data_root``): ``$FLB_DATA_ROOT`` when it holds the CIFAR-10/100 pickles; else, when the
project sits beside ``shared/`` (``../shared/data/prepare.py``; ``$FLB_SHARED_DATA`` names another folder),
the CIFAR files are rebuilt once (about 30 s) into a per-user cache *outside the checkout*
(:func:`real_data_cache`: ``$FLB_TEST_DATA_CACHE``, else ``$XDG_CACHE_HOME/flb/test-data``, else
``~/.cache/flb/test-data``) and reused while ``shared/``'s checksum manifest is unchanged; else the tests that
need them are skipped with the reason. Substitute weights (``real_weights_dir``): ``$FLB_WEIGHTS_DIR``, else
``../shared/data/weights``, else skipped.

Tests write only to temporary folders. The session fails when a test created, changed or deleted a file in the
checkout (:func:`checkout_files` at the start and the end of the session; pytest's and hypothesis' own caches,
``__pycache__`` and ``.venv`` aside).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FLB_SHARED_DATA", ROOT.parent / "shared" / "data"))

# Tests never reach for the network: the download path is exercised with monkeypatching only.
os.environ.setdefault("FLB_OFFLINE", "1")

# Under pytest-xdist (``-n``, the README's command: pyproject's addopts) each worker computes with one thread, and
# so do the processes it starts: workers of several OpenMP threads each on as many cores spin against each other
# (two SqueezeNet forwards of two threads each on 2 cores ran 5x slower than of one thread each).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

# Property-based tests keep no example database, and hypothesis' own caches (unicode data, constants) go to
# the temporary folder: it would otherwise write .hypothesis/ into the checkout (tests write only to temporary
# folders; the session guard below checks it).
try:
    from hypothesis import settings as _hypothesis_settings
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "flb-test-hypothesis")
    _hypothesis_settings.register_profile("flb", database=None)
    _hypothesis_settings.load_profile("flb")
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    pass


# ------------------------------------------------------------------------------------------------ real data
def _has_cifar(root: Path) -> bool:
    return (root / "cifar-10-batches-py" / "test_batch").is_file() and (
        root / "cifar-100-python" / "test"
    ).is_file()


def real_data_cache() -> Path:
    """Where CIFAR rebuilt from ``shared/data`` is kept between sessions, outside the checkout:
    ``$FLB_TEST_DATA_CACHE``, else ``$XDG_CACHE_HOME/flb/test-data``, else ``~/.cache/flb/test-data``."""
    if os.environ.get("FLB_TEST_DATA_CACHE"):
        return Path(os.environ["FLB_TEST_DATA_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "flb" / "test-data"


def _current(dest: Path, manifest: Path) -> bool:
    mine = dest / "MANIFEST.sha256"
    return _has_cifar(dest) and mine.is_file() and mine.read_bytes() == manifest.read_bytes()


def rebuild_real_data(shared: Path, dest: Path) -> Path:
    """``dest`` holding the CIFAR pickles rebuilt by ``shared/prepare.py`` and ``shared``'s manifest; rebuilt
    only when absent or from another manifest. Built in a temporary folder beside ``dest`` and renamed into
    place, so that a session killed half-way, or two sessions at once, never leave a half-built data root."""
    manifest = shared / "MANIFEST.sha256"
    if _current(dest, manifest):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        subprocess.run([sys.executable, str(shared / "prepare.py"), "--out", str(tmp)], check=True,
                       capture_output=True)  # fmt: skip
        shutil.copyfile(manifest, tmp / "MANIFEST.sha256")
        if _current(dest, manifest):  # another session finished first
            return dest
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


@pytest.fixture(scope="session")
def real_data_root() -> Path:
    """A data root holding the real CIFAR-10/100 pickles and a MANIFEST.sha256 beside them (module docstring)."""
    env = os.environ.get("FLB_DATA_ROOT")
    if env and _has_cifar(Path(env)):
        return Path(env)
    prepare = SHARED_DATA / "prepare.py"
    if not prepare.is_file():
        pytest.skip(f"no real data: set FLB_DATA_ROOT to a folder with the CIFAR pickles, or provide {prepare}")
    return rebuild_real_data(SHARED_DATA, real_data_cache())


@pytest.fixture(scope="session")
def real_weights_dir() -> Path:
    """The folder of the substitute safetensors weights."""
    env = os.environ.get("FLB_WEIGHTS_DIR")
    for cand in ([Path(env)] if env else []) + [SHARED_DATA / "weights"]:
        if cand.is_dir() and any(cand.glob("*.safetensors")):
            return cand
    pytest.skip("no substitute weights: set FLB_WEIGHTS_DIR or provide shared/data/weights")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch intra-op thread for a module of tiny-tensor tests (threads only add synchronisation there);
    modules opt in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------------ checkout guard
#: Path parts the guard ignores: caches of Python, pytest, ruff and pytest-benchmark (hypothesis keeps none:
#: its profile above has no database).
GUARD_IGNORED_PARTS = frozenset({"__pycache__", ".pytest_cache", ".ruff_cache", ".benchmarks"})


def checkout_files(root: Path) -> dict[str, tuple[str, int, int]] | None:
    """``{path: (git status, size, mtime_ns)}`` of every file of the checkout ``root`` that git reports as
    changed, untracked or ignored (one by one, ``.venv`` and :data:`GUARD_IGNORED_PARTS` aside); a file a
    test adds, changes or deletes changes this map. ``None`` when ``root`` is not a git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain=v1", "-z", "--ignored=traditional",
             "--untracked-files=all", "--", ".", ":(exclude).venv"],
            capture_output=True, check=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    files: dict[str, tuple[str, int, int]] = {}
    items = iter(out.split(b"\0"))
    for item in items:
        if len(item) < 4:
            continue
        status, path = item[:2].decode(), os.fsdecode(item[3:])
        if status[0] in "RC":  # a rename or copy: the next item is its source
            next(items, None)
        if GUARD_IGNORED_PARTS.intersection(Path(path).parts):
            continue
        try:
            st = (root / path).stat()
            files[path] = (status, st.st_size, st.st_mtime_ns)
        except OSError:
            files[path] = (status, -1, -1)
    return files


def checkout_changes(before: dict[str, tuple[str, int, int]], after: dict[str, tuple[str, int, int]]) -> list[str]:
    """``"<path>: added|removed|changed"`` for each file whose entry differs between two :func:`checkout_files`."""
    out = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if new is None or new[1] < 0:
            what = "removed"
        elif old is None and new[0] in ("??", "!!"):
            what = "added"
        else:  # a tracked file, clean before (so not listed) or changed further
            what = "changed"
        out.append(f"{path}: {what}")
    return out


_CHECKOUT_BEFORE = pytest.StashKey[dict]()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Benchmarks (``--benchmark-only``) time one process: pyproject's ``-n auto`` (pytest-xdist) is turned off for
    them, as pytest-benchmark would otherwise skip every benchmark under xdist. Runs before xdist reads ``-n``."""
    if config.getoption("benchmark_only", default=False):
        config.option.numprocesses = 0
        config.option.dist = "no"


def pytest_sessionstart(session: pytest.Session) -> None:
    before = checkout_files(ROOT)
    if before is not None:
        session.stash[_CHECKOUT_BEFORE] = before


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when the tests wrote into the checkout (the files are listed)."""
    before = session.stash.get(_CHECKOUT_BEFORE, None)
    after = checkout_files(ROOT) if before is not None else None
    if before is None or after is None:
        return
    changes = checkout_changes(before, after)
    if not changes:
        return
    lines = [
        f"the tests wrote into the checkout {ROOT} ({len(changes)} file(s)); tests must write only to temporary "
        "folders (tmp_path, monkeypatch.chdir(tmp_path), snakemake --directory <tmp>):",
        *changes[:40],
        *([f"... and {len(changes) - 40} more"] if len(changes) > 40 else []),
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "files written into the checkout", red=True)
        for line in lines:
            reporter.write_line(line)
    else:
        print("\n".join(lines), file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


#: The runner plug-ins the tests install (tests/plugins/toy_plugin.py).
PLUGINS = Path(__file__).parent / "plugins"


@pytest.fixture
def runner_plugin(monkeypatch):
    """``install(module)``: the runner plug-in ``module`` of tests/plugins/ imported as ``$FLB_RUNNER_MODULES``
    names it (returned); the runner and job registries are restored afterwards, the module forgotten."""
    from benchmark import jobs, runners

    runners.load_runners()  # the real ones first, so that the restored registries hold them
    monkeypatch.setattr(runners, "_RUNNERS", dict(runners._RUNNERS))
    monkeypatch.setattr(jobs, "JOB_KINDS", dict(jobs.JOB_KINDS))
    monkeypatch.syspath_prepend(str(PLUGINS))
    installed: list[str] = []

    def install(module: str):
        sys.modules.pop(module, None)
        monkeypatch.setenv("FLB_RUNNER_MODULES", module)
        runners.load_runners()
        installed.append(module)
        return sys.modules[module]

    yield install
    for module in installed:
        sys.modules.pop(module, None)
