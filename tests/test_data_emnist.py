"""EMNIST ByClass (:mod:`benchmark.data.emnist`): the IDX reader on a tiny archive in the real ``gzip.zip``
layout, the verified download against a local HTTP server on 127.0.0.1 (the fake archive's md5 standing in
for NIST's), corrupt archives and files, and the NOT RUN reason offline. No real EMNIST data is used."""

from __future__ import annotations

import gzip
import hashlib
import io
import string
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

# The 127.0.0.1 HTTP server and the online switch of the download tests, reused.
from test_data_download import fake_remote, fetch_cli, online, serve_remote, server  # noqa: F401

from benchmark.data import download, emnist, folders
from benchmark.data.registry import dataset_info, list_datasets, load_dataset
from benchmark.errors import CacheCorruptError, ChecksumError, DataMissingError
from benchmark.tables import availability

CLASSES = string.digits + string.ascii_uppercase + string.ascii_lowercase  # what byclass's mapping lists


def _idx(data: np.ndarray, magic: int) -> bytes:
    return gzip.compress(struct.pack(f">{1 + data.ndim}I", magic, *data.shape) + data.tobytes(), mtime=0)


def _images(n: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).integers(0, 256, (n, 28, 28), dtype=np.uint8)
    x[:, 0, :] = 255  # a bright first *row* as stored: the loader must not transpose it to a column
    x[:, 1:, 0] = 0
    return x


def fake_files() -> dict[str, bytes]:
    """``gzip/...`` members of a tiny stand-in for NIST's gzip.zip (byclass, plus one other variant)."""
    train_x, test_x = _images(7, 0), _images(3, 1)
    train_y = np.array([0, 61, 10, 36, 5, 5, 1], dtype=np.uint8)
    test_y = np.array([61, 0, 35], dtype=np.uint8)
    mapping = "".join(f"{i} {ord(c)}\n" for i, c in enumerate(CLASSES))
    files = {f"gzip/{emnist.MAPPING}": mapping.encode(), "gzip/emnist-digits-mapping.txt": b"0 48\n"}
    for split, x, y in (("train", train_x, train_y), ("test", test_x, test_y)):
        img, lab = emnist.split_files(split)
        files[f"gzip/{img}"] = _idx(x, emnist.IMAGE_MAGIC)
        files[f"gzip/{lab}"] = _idx(y, emnist.LABEL_MAGIC)
    return files


def fake_zip(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in sorted(files.items()):
            zf.writestr(name, data)
    return buf.getvalue()


def _extract_by_hand(root: Path, files: dict[str, bytes], manifest: bool = True) -> Path:
    """The zip extracted into ``root/emnist`` (as `flb data fetch` leaves it), with or without the manifest."""
    for name, data in files.items():
        (root / emnist.EMNIST_DEST / name).parent.mkdir(parents=True, exist_ok=True)
        (root / emnist.EMNIST_DEST / name).write_bytes(data)
    if manifest:
        folders.record_manifest(root, emnist.EMNIST_FOLDER, download.SOURCES["emnist"].record)
    return root / emnist.EMNIST_FOLDER


# ------------------------------------------------------------------------------------------ loader


def test_registered_with_the_official_source() -> None:
    info = dataset_info("emnist")
    assert "emnist" in list_datasets() and info.num_classes == 62 and info.splits == ("train", "test")
    (remote,) = download.SOURCES["emnist"].remotes
    tv = pytest.importorskip("torchvision.datasets").EMNIST
    assert (remote.url, remote.checksum, remote.algorithm) == (tv.url, tv.md5, "md5")
    assert remote.extract and remote.dest == "emnist" and download.SOURCES["emnist"].folder == "emnist/gzip"


def test_loader_reads_the_idx_files_as_stored(tmp_path) -> None:
    files = fake_files()
    _extract_by_hand(tmp_path, files)
    tr = load_dataset("emnist", "train", tmp_path, download=False)
    te = load_dataset("emnist", "test", tmp_path, download=False)
    assert tr.images.dtype == np.uint8 and tr.images.shape == (7, 28, 28) and te.images.shape == (3, 28, 28)
    np.testing.assert_array_equal(tr.images, _images(7, 0))  # byte for byte, not transposed
    assert (tr.images[:, 0, :] == 255).all() and tr.images.flags.writeable
    assert tr.labels.dtype == np.int64 and tr.labels.tolist() == [0, 61, 10, 36, 5, 5, 1]
    assert te.labels.tolist() == [61, 0, 35] and tr.groups is None
    assert tr.class_names == tuple(CLASSES) and tr.num_classes == 62
    assert tr.meta["variant"] == "byclass" and "transposed" in tr.meta["orientation"]
    again = load_dataset("emnist", "train", tmp_path, download=False)
    assert again.checksum == tr.checksum != te.checksum


def test_hand_extracted_files_without_manifest_are_not_read(tmp_path) -> None:
    _extract_by_hand(tmp_path, fake_files(), manifest=False)
    with pytest.raises(ChecksumError, match=r"no checksum known.*MANIFEST\.sha256"):
        load_dataset("emnist", "train", tmp_path, download=False)


def test_changed_file_is_rejected_before_it_is_parsed(tmp_path) -> None:
    folder = _extract_by_hand(tmp_path, fake_files())
    img, _ = emnist.split_files("test")
    (folder / img).write_bytes(b"not the recorded file")
    with pytest.raises(ChecksumError, match=f"sha256 mismatch for .*{img}"):
        load_dataset("emnist", "test", tmp_path, download=False)


@pytest.mark.parametrize(
    "body, why",
    [
        (b"plain bytes, not gzip", "Not a gzipped file"),
        (_idx(np.zeros((2, 28, 28), np.uint8), emnist.LABEL_MAGIC), "IDX magic 0x0801, expected 0x0803"),
        (gzip.compress(struct.pack(">4I", 0x0803, 3, 28, 28) + bytes(28 * 28 * 2)), "data length disagrees"),
        (gzip.compress(struct.pack(">4I", 0x0803, 1, 28, 28) + bytes(28 * 28 + 1)), "data length disagrees"),
        (_idx(np.zeros((2, 28, 28), np.uint8), emnist.IMAGE_MAGIC)[:-9], "Compressed file ended"),
    ],
    ids=["not-gzip", "wrong-magic", "short", "long", "truncated-gzip"],
)
def test_malformed_verified_file_gives_one_clear_error(tmp_path, body: bytes, why: str) -> None:
    files = fake_files()
    img, _ = emnist.split_files("train")
    files[f"gzip/{img}"] = body  # vouched for by the manifest, so it is verified and then parsed
    _extract_by_hand(tmp_path, files)
    with pytest.raises(CacheCorruptError, match=f"cannot read .*{img}: .*{why}") as err:
        load_dataset("emnist", "train", tmp_path, download=False)
    assert "flb data fetch emnist" in err.value.fix


def test_absent_files_name_the_fetch_command(tmp_path) -> None:
    with pytest.raises(DataMissingError, match="flb data fetch emnist") as err:
        load_dataset("emnist", "train", tmp_path, download=False)
    assert (
        "emnist-byclass-train-images-idx3-ubyte.gz" in err.value.what and emnist.EMNIST_URL in err.value.fix
    )


# ------------------------------------------------------------------------------------ download path


def test_fetch_downloads_verifies_extracts_and_records(tmp_path, fake_remote, server, online, capsys):  # noqa: F811
    root = tmp_path / "data"
    out = fake_remote.fetch(root, "emnist", "gzip.zip", fake_zip(fake_files()), "md5", "emnist")
    assert "downloaded and verified" in out and "md5" in out
    manifest = (root / emnist.EMNIST_FOLDER / "MANIFEST.sha256").read_text()
    assert sorted(line.split()[1] for line in manifest.splitlines()[1:]) == sorted(
        download.SOURCES["emnist"].record
    )
    te = load_dataset("emnist", "test", root, download=False)
    assert te.labels.tolist() == [61, 0, 35] and te.images.shape == (3, 28, 28)
    # Present now: a second fetch verifies and downloads nothing.
    rc, out = fetch_cli(capsys, "emnist", "--data-root", str(root))
    assert rc == 0 and "nothing downloaded" in out and server[2] == ["/gzip.zip"]


def test_loader_downloads_when_allowed(tmp_path, monkeypatch, server, online) -> None:  # noqa: F811
    body = fake_zip(fake_files())
    serve_remote(monkeypatch, server, "emnist", "gzip.zip", body, hashlib.md5(body).hexdigest())
    tr = load_dataset("emnist", "train", tmp_path, download=True)
    assert len(tr) == 7 and server[2] == ["/gzip.zip"]


def test_corrupt_archive_is_rejected_and_nothing_is_written(tmp_path, fake_remote, online) -> None:  # noqa: F811
    out = fake_remote.fetch_cut_off(tmp_path / "data", "emnist", "gzip.zip", fake_zip(fake_files()), "md5")
    assert "md5 mismatch" in out and out.count("\n") == 2  # the progress line and the one-line error


# ------------------------------------------------------------------------------------------ planning


@pytest.fixture
def fresh_availability():
    availability.clear_caches()
    yield
    availability.clear_caches()


def test_offline_blocker_names_the_fetch_command(tmp_path, fresh_availability) -> None:
    reason = availability.dataset_blocker("emnist", str(tmp_path))  # FLB_OFFLINE=1 (conftest)
    assert reason is not None and f"`flb data fetch emnist --data-root {tmp_path}`" in reason.render()
    assert "emnist-byclass-t" in reason.render() and "FLB_DATA_ROOT" in reason.render()


def test_online_the_workflow_fetches_instead(tmp_path, monkeypatch, fresh_availability) -> None:
    monkeypatch.setattr(availability, "online", lambda: True)
    assert availability.dataset_fetch_planned("emnist", str(tmp_path))
    assert availability.dataset_blocker("emnist", str(tmp_path)) is None
