"""Text loaders: the real AG News test split, SST-2 and SST-5 files (through a temporary data root that
links to ``shared/data/text``), plus small fixtures for formats, checksums and the download paths."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from benchmark.data import text
from benchmark.data.registry import load_dataset
from benchmark.errors import ChecksumError, ConfigError, DataMissingError

ROOT = Path(__file__).resolve().parents[1]
SHARED_TEXT = Path(os.environ.get("FLB_SHARED_DATA", ROOT.parent / "shared" / "data")) / "text"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(root: Path, rels: list[str]) -> None:
    with open(root / "MANIFEST.sha256", "a") as f:
        f.writelines(f"{_sha256(root / r)}  {r}\n" for r in rels)


@pytest.fixture
def real_text_root(tmp_path) -> Path:
    """A data root whose text/ links to the real files in shared/data/text, with a manifest made here."""
    if not (SHARED_TEXT / "ag_news_csv" / "test.csv").is_file():
        pytest.skip(f"no real text data at {SHARED_TEXT} (set FLB_SHARED_DATA)")
    (tmp_path / "text").mkdir()
    for sub in ("ag_news_csv", "sst2_glue_reformatted", "sst_trees"):
        (tmp_path / "text" / sub).symlink_to(SHARED_TEXT / sub, target_is_directory=True)
    rels = [f"text/sst2_glue_reformatted/{s}.tsv" for s in ("train", "dev", "test")]
    rels += [f"text/sst_trees/{s}.txt" for s in ("train", "dev", "test")]
    _manifest(tmp_path, rels)  # AG News needs none: the official md5 applies
    return tmp_path


def _spy(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = text.read_verified_text
    monkeypatch.setattr(text, "read_verified_text", lambda p: calls.append(str(p)) or real(p))
    return calls


# ---------------------------------------------------------------------------------- real files


@pytest.mark.realdata
def test_real_ag_news_test_split(real_text_root) -> None:
    d = load_dataset("ag_news", "test", real_text_root)
    assert len(d) == 7600 and d.num_classes == 4 and d.modality == "text"
    assert np.bincount(d.labels).tolist() == [1900] * 4
    assert d.class_names == ("World", "Sports", "Business", "Sci/Tech")
    assert d.texts[0].startswith("Fears for T N pension after talks Unions representing workers")
    assert d.labels[0] == 2 and d.meta["source"] == "official csv" and len(d.checksum) == 64


@pytest.mark.realdata
def test_real_ag_news_train_is_absent_offline(real_text_root) -> None:
    with pytest.raises(DataMissingError) as err:
        load_dataset("ag_news", "train", real_text_root)  # FLB_OFFLINE=1 (conftest)
    msg = str(err.value)
    assert "train.csv" in msg and str(real_text_root / "text" / "ag_news_csv") in msg
    assert "FLB_DATA_ROOT" in msg and "\n" not in msg


@pytest.mark.realdata
@pytest.mark.parametrize(("split", "counts"), [
    ("train", [29780, 37569]), ("dev", [428, 444]), ("test", [912, 909]),
])  # fmt: skip
def test_real_sst2(real_text_root, split, counts) -> None:
    d = load_dataset("sst2", split, real_text_root)
    assert np.bincount(d.labels).tolist() == counts and d.class_names == ("negative", "positive")
    assert all(isinstance(t, str) and t and "\t" not in t for t in d.texts)
    if split == "train":
        assert len(d) == 67349 and d.texts[0] == "hide new secretions from the parental units"


@pytest.mark.realdata
@pytest.mark.parametrize(("split", "counts"), [
    ("train", [1092, 2218, 1624, 2322, 1288]),
    ("dev", [139, 289, 229, 279, 165]),
    ("test", [279, 633, 389, 510, 399]),
])  # fmt: skip
def test_real_sst5_has_the_published_label_counts(real_text_root, split, counts) -> None:
    d = load_dataset("sst5", split, real_text_root)
    assert len(d) == sum(counts) and np.bincount(d.labels).tolist() == counts
    if split == "train":
        assert d.texts[0].startswith("The Rock is destined to be the 21st Century 's new `` Conan ''")
        assert d.labels[0] == 3
    assert not any("-LRB-" in t or "-RRB-" in t for t in d.texts)


@pytest.mark.realdata
def test_shared_manifest_verifies_the_same_layout(tmp_path) -> None:
    """The layout is shared/data's, so its MANIFEST.sha256 (paths text/...) applies unchanged."""
    shared_manifest = SHARED_TEXT.parent / "MANIFEST.sha256"
    if not shared_manifest.is_file():
        pytest.skip("no shared/data/MANIFEST.sha256")
    (tmp_path / "text").symlink_to(SHARED_TEXT, target_is_directory=True)
    (tmp_path / "MANIFEST.sha256").write_text(shared_manifest.read_text())
    assert len(load_dataset("sst5", "dev", tmp_path)) == 1101
    assert len(load_dataset("sst2", "dev", tmp_path)) == 872


# ------------------------------------------------------------------------------------ fixtures


def _write(root: Path, rel: str, content: str, manifest: bool = True) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    if manifest:
        _manifest(root, [rel])
    return path


@pytest.mark.parametrize("layout", ["glue", "swapped", "no_header", "no_header_swapped"])
def test_sst2_column_orders(tmp_path, layout) -> None:
    rows = [("a fine film .", 1), ("dull", 0), ('tab-free "quoted" text', 1)]
    if layout == "glue":
        body = "sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows)
    elif layout == "swapped":
        body = "label\tcontent\n" + "".join(f"{y}\t{s}\n" for s, y in rows)
    elif layout == "no_header":
        body = "".join(f"{s}\t{y}\n" for s, y in rows)
    else:
        body = "".join(f"{y}\t{s}\n" for s, y in rows)
    _write(tmp_path, "text/SST-2/train.tsv", body)
    d = load_dataset("sst2", "train", tmp_path)
    assert d.texts == tuple(s for s, _ in rows) and d.labels.tolist() == [1, 0, 1]
    assert d.meta["folder"] == "text/SST-2"


def test_sst2_glue_unlabelled_test_is_a_clear_error(tmp_path) -> None:
    _write(tmp_path, "text/SST-2/test.tsv", "index\tsentence\n0\tuneasy mishmash\n")
    with pytest.raises(DataMissingError, match="no label column"):
        load_dataset("sst2", "test", tmp_path)


def test_sst2_missing_names_both_folders(tmp_path) -> None:
    with pytest.raises(DataMissingError) as err:
        load_dataset("sst2", "dev", tmp_path)
    msg = str(err.value)
    assert "dev.tsv" in msg and str(tmp_path / "text" / "SST-2") in msg and "sst2_glue_reformatted" in msg
    with pytest.raises(ConfigError, match="no split 'validation'"):
        load_dataset("sst2", "validation", tmp_path)


def test_ptb_tree_parsing() -> None:
    s, y = text.parse_ptb_tree("(4 (2 (2 -LRB-) (2 Great)) (3 (2 -RRB-) (4 fun)))")
    assert (s, y) == ("( Great ) fun", 4)
    for bad in ("(2 (2 a)", "2 a", "(7 (2 a))", "(2 (2 a)))"):
        with pytest.raises(ValueError):
            text.parse_ptb_tree(bad)


def test_sst5_fixture_and_trees_folder(tmp_path) -> None:
    _write(tmp_path, "text/trees/dev.txt", "(0 (0 awful))\n\n(3 (2 quite) (3 good))\n")
    d = load_dataset("sst5", "dev", tmp_path)
    assert d.texts == ("awful", "quite good") and d.labels.tolist() == [0, 3] and d.num_classes == 5


def test_corrupt_text_is_refused_before_reading(tmp_path, monkeypatch) -> None:
    path = _write(tmp_path, "text/sst_trees/train.txt", "(1 (1 bad))\n")
    path.write_text("(4 (4 good))\n")
    calls = _spy(monkeypatch)
    with pytest.raises(ChecksumError, match=r"sha256 mismatch for .*sst_trees/train\.txt"):
        load_dataset("sst5", "train", tmp_path)
    _write(tmp_path, "text/ag_news_csv/test.csv", '"1","t","d"\n', manifest=False)
    with pytest.raises(ChecksumError, match=r"md5 mismatch for .*ag_news_csv/test\.csv"):
        load_dataset("ag_news", "test", tmp_path)  # no manifest entry: the official md5 applies
    assert calls == []


def test_ag_news_official_csv_format(tmp_path) -> None:
    body = '"3","Wall St. Bears","Reuters - Short-sellers, ""quoted""\\n"\n"1","Title","Desc"\n'
    _write(tmp_path, "text/ag_news_csv/train.csv", body)
    d = load_dataset("ag_news", "train", tmp_path)
    assert d.texts == ('Wall St. Bears Reuters - Short-sellers, "quoted"\\n', "Title Desc")
    assert d.labels.tolist() == [2, 0]


def _inject_download(monkeypatch, name: str, payloads: dict[str, bytes]) -> list[str]:
    """Serve ``payloads`` (url -> bytes) to the verified downloader, with their md5 as the official one."""
    import dataclasses
    import io

    from benchmark.data import download

    src = download.SOURCES[name]
    remotes = tuple(
        dataclasses.replace(r, checksum=hashlib.new(r.algorithm, payloads[r.url]).hexdigest())
        for r in src.remotes
    )
    monkeypatch.setitem(download.SOURCES, name, dataclasses.replace(src, remotes=remotes))
    calls: list[str] = []
    monkeypatch.setattr(
        download, "URLOPEN", lambda req: calls.append(req.full_url) or io.BytesIO(payloads[req.full_url])
    )
    monkeypatch.delenv("FLB_OFFLINE", raising=False)
    return calls


def test_ag_news_download_official_csvs(tmp_path, monkeypatch) -> None:
    from benchmark.data import download

    bodies = {"train.csv": b'"3","Stocks","up"\n"2","Goal","late"\n', "test.csv": b'"1","World","news"\n'}
    urls = {r.url: bodies[r.filename] for r in download.SOURCES["ag_news"].remotes}
    calls = _inject_download(monkeypatch, "ag_news", urls)
    for f, body in bodies.items():  # the official md5 the loader checks, for these stand-in files
        monkeypatch.setitem(text.AG_MD5, f, hashlib.md5(body).hexdigest())
    d = load_dataset("ag_news", "train", tmp_path, download=True)
    assert sorted(calls) == sorted(urls) and d.texts == ("Stocks up", "Goal late")
    assert d.labels.tolist() == [2, 1] and d.meta["source"] == "official csv"
    again = load_dataset("ag_news", "train", tmp_path, download=False)  # the written file, verified
    assert again.texts == d.texts and again.checksum == d.checksum and len(calls) == 2


def test_ag_news_huggingface_export_still_reads(tmp_path) -> None:
    _write(tmp_path, "text/ag_news_csv/hf_train.csv", 'label,text\n2,"Stocks, up"\n')
    d = load_dataset("ag_news", "train", tmp_path, download=False)
    assert d.texts == ("Stocks, up",) and d.meta["source"] == "huggingface ag_news"


def test_sst2_download_extracts_glue_zip_and_records_manifest(tmp_path, monkeypatch) -> None:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for s in ("train", "dev"):
            zf.writestr(f"SST-2/{s}.tsv", "sentence\tlabel\nok\t1\n")
        zf.writestr("SST-2/test.tsv", "index\tsentence\n0\tok\n")
    calls = _inject_download(monkeypatch, "sst2", {text.SST2_URL: buf.getvalue()})
    d = load_dataset("sst2", "dev", tmp_path, download=True)
    assert len(d) == 1 and calls == [text.SST2_URL]
    assert "test.tsv" in (tmp_path / "text" / "SST-2" / "MANIFEST.sha256").read_text()
