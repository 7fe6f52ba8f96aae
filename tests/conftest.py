"""Shared fixtures: where the real data and weights are, and an offline default.

Real-data tests use ``$FLB_DATA_ROOT`` when it holds the CIFAR pickles; otherwise, when the project sits
beside ``shared/`` (as on the developers' machines and CI), the CIFAR files are rebuilt once into
``.cache/data`` with ``shared/data/prepare.py`` (about 30 s) and its checksum manifest is copied beside them.
Without either, those tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("FLB_SHARED_DATA", ROOT.parent / "shared" / "data"))

# Tests never reach for the network: the download path is exercised with monkeypatching only.
os.environ.setdefault("FLB_OFFLINE", "1")


def _has_cifar(root: Path) -> bool:
    return (root / "cifar-10-batches-py" / "test_batch").is_file() and (
        root / "cifar-100-python" / "test"
    ).is_file()


@pytest.fixture(scope="session")
def real_data_root() -> Path:
    """A data root holding the real CIFAR-10/100 pickles and a MANIFEST.sha256 beside them."""
    env = os.environ.get("FLB_DATA_ROOT")
    if env and _has_cifar(Path(env)):
        return Path(env)
    prepare = SHARED_DATA / "prepare.py"
    if not prepare.is_file():
        pytest.skip(f"no real data: set FLB_DATA_ROOT or provide {prepare}")
    dest = ROOT / ".cache" / "data"
    if not _has_cifar(dest) or not (dest / "MANIFEST.sha256").is_file():
        subprocess.run([sys.executable, str(prepare), "--out", str(dest)], check=True, capture_output=True)
        shutil.copyfile(SHARED_DATA / "MANIFEST.sha256", dest / "MANIFEST.sha256")
    return dest


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
