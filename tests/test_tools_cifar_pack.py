"""tools/cifar_pack.py moves CIFAR pickles losslessly: unpack rebuilds them byte for byte, checked against the
sha256 recorded when packing and against a MANIFEST; a damaged pack or a MANIFEST that disagrees writes nothing."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest
from tool_scripts import load_tool

cifar_pack = load_tool("cifar_pack")


@pytest.fixture
def batches(tmp_path) -> Path:
    """Two small pickles in CIFAR's layout (bytes keys, N x 3072 uint8 rows). CIFAR's own are Python 2 pickles,
    whose array bytes lie raw in the file; Python 3 writes them raw from protocol 3 on (protocol 2 encodes them
    as latin-1 text, which the tool refuses: last test)."""
    src = tmp_path / "cifar-10-batches-py"
    src.mkdir()
    rng = np.random.default_rng(0)
    for name, n in (("data_batch_1", 12), ("test_batch", 7)):
        obj = {
            b"batch_label": name.encode(),
            b"labels": rng.integers(0, 10, n).tolist(),
            b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            b"filenames": [f"img_{i}.png".encode() for i in range(n)],
        }
        (src / name).write_bytes(pickle.dumps(obj, protocol=4))
    return src


def _manifest(src: Path, path: Path, names: list[str], wrong: str | None = None) -> Path:
    lines = []
    for name in names:
        digest = hashlib.sha256((src / name).read_bytes()).hexdigest()
        lines.append(f"{'0' * 64 if name == wrong else digest}  {src.name}/{name}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_pack_unpack_is_byte_identical_and_checked_against_the_manifest(batches, tmp_path) -> None:
    names = ["data_batch_1", "test_batch"]
    cifar_pack.main(
        ["pack", "--src", str(batches), "--out", str(tmp_path / "pack"), "--files", ",".join(names)]
    )
    manifest = _manifest(batches, tmp_path / "MANIFEST.sha256", names)
    out = tmp_path / "rebuilt"
    cifar_pack.main(["unpack", "--src", str(tmp_path / "pack"), "--out", str(out), "--manifest", str(manifest),
                     "--workers", "1"])  # fmt: skip
    for name in names:
        assert (out / name).read_bytes() == (batches / name).read_bytes()
    # the image array travels as WebP, not inside the (zeroed) pickle skeleton
    skeleton = (tmp_path / "pack" / "data_batch_1.skel.xz").stat().st_size
    assert skeleton < 12 * 3072 // 4


def test_damaged_pack_or_disagreeing_manifest_writes_nothing(batches, tmp_path) -> None:
    pack = tmp_path / "pack"
    cifar_pack.main(["pack", "--src", str(batches), "--out", str(pack), "--files", "test_batch"])
    wrong = _manifest(batches, tmp_path / "M", ["test_batch"], wrong="test_batch")
    with pytest.raises(SystemExit, match="differs"):
        cifar_pack.main(["unpack", "--src", str(pack), "--out", str(tmp_path / "a"), "--manifest", str(wrong),
                         "--workers", "1"])  # fmt: skip
    assert not (tmp_path / "a" / "test_batch").exists()
    # one flipped byte in the skeleton's zeroed region: decodes, but the sha256 no longer matches
    import lzma

    skel = bytearray(lzma.decompress((pack / "test_batch.skel.xz").read_bytes()))
    skel[-40] ^= 0xFF
    (pack / "test_batch.skel.xz").write_bytes(lzma.compress(bytes(skel)))
    with pytest.raises(SystemExit, match="differs"):
        cifar_pack.main(["unpack", "--src", str(pack), "--out", str(tmp_path / "b"), "--workers", "1"])
    assert not (tmp_path / "b" / "test_batch").exists()


def test_a_pickle_whose_array_is_not_raw_gets_one_clear_error(tmp_path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    obj = {b"data": np.arange(5 * 3072, dtype=np.uint8).reshape(5, 3072), b"labels": [0] * 5}
    (src / "data_batch_1").write_bytes(pickle.dumps(obj, protocol=2))  # array bytes as latin-1 text
    with pytest.raises(SystemExit, match="not stored contiguously"):
        cifar_pack.main(["pack", "--src", str(src), "--out", str(tmp_path / "p"), "--files", "data_batch_1"])
