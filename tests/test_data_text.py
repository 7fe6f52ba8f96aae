"""Text loaders: the real AG News test split, SST-2 and SST-5 files (through a temporary data root that
links to ``shared/data/text``), plus small fixtures for formats, checksums and the download paths."""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

# The 127.0.0.1 HTTP server and the online switch of the download tests, reused (MNLI below).
from test_data_download import fake_remote, fetch_cli, online, serve_remote, server  # noqa: F401

from benchmark.data import text
from benchmark.data.registry import load_dataset
from benchmark.errors import CacheCorruptError, ChecksumError, ConfigError, DataMissingError

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


# ----------------------------------------------------------------------------------------------- MNLI
#
# A tiny MNLI.zip in GLUE's layout (MNLI/{train,dev_matched,dev_mismatched,test_matched}.tsv, original/),
# served by the 127.0.0.1 HTTP server of the download tests; its sha256 stands in for the official one.

_PARSES = ("( ( a b ) )", "( ( c ) )", "(ROOT (S (NP a) (VP b)))", "(ROOT (S (NP c)))")
_MNLI_ROWS = {  # (genre, premise, hypothesis, gold label)
    "train": [
        ("fiction", 'He said "no" twice.', "He refused.", "entailment"),
        ("slate", "The shop opens at nine.", "The shop is open all night.", "contradiction"),
        ("government", "Tabs\\tstay escaped; a stray \r stays too.", "It is about text.", "neutral"),
    ],
    "dev_matched": [
        ("travel", "The bridge is old.", "The bridge was built long ago.", "entailment"),
        ("fiction", "Nobody agreed here.", "The annotators split.", "-"),
        ("slate", "Prices rose in May.", "Prices fell in May.", "contradiction"),
    ],
    "dev_mismatched": [("letters", "Dear friend, thanks.", "The letter is rude.", "contradiction")],
}


def mnli_tsv(split: str, rows=None) -> str:
    """A GLUE MNLI TSV: train has label1 only, the dev files label1..label5, test no labels."""
    n_labels = {"train": 1, "test_matched": 0}.get(split, 5)
    labels = [f"label{i}" for i in range(1, n_labels + 1)]
    head = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
            "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", *labels]  # fmt: skip
    head += ["gold_label"] if n_labels else []
    lines = ["\t".join(head)]
    for i, (genre, s1, s2, gold) in enumerate(_MNLI_ROWS.get(split, []) if rows is None else rows):
        golds = [gold if gold != "-" else "neutral"] * n_labels + ([gold] if n_labels else [])
        lines.append("\t".join([str(i), str(100 + i), f"{100 + i}e", genre, *_PARSES, s1, s2, *golds]))
    return "\n".join(lines) + "\n"


def mnli_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for split in ("train", "dev_matched", "dev_mismatched", "test_matched"):
            zf.writestr(f"MNLI/{split}.tsv", mnli_tsv(split))
        zf.writestr("MNLI/README.txt", "GLUE MNLI (test fixture)\n")
        zf.writestr("MNLI/original/multinli_1.0_dev_matched.txt", "gold_label\tsentence1\n")
    return buf.getvalue()


def test_mnli_registered_with_glue_source() -> None:
    from benchmark.data import download
    from benchmark.data.registry import dataset_info

    info = dataset_info("mnli")
    assert info.num_classes == 3 and info.modality == "text"
    assert info.splits == ("train", "dev_matched", "dev_mismatched")
    src = download.SOURCES["mnli"]
    (remote,) = src.remotes
    assert remote.url == "https://dl.fbaipublicfiles.com/glue/data/MNLI.zip" and remote.algorithm == "sha256"
    assert remote.checksum == text.MNLI_ZIP_SHA256 and len(remote.checksum) == 64
    assert remote.extract and remote.dest == "text" and src.folder == "text/MNLI"
    assert src.record == ("train.tsv", "dev_matched.tsv", "dev_mismatched.tsv")


def test_mnli_pairs_labels_and_skipped_rows(tmp_path) -> None:
    _write(tmp_path, "text/MNLI/dev_matched.tsv", mnli_tsv("dev_matched"))
    d = load_dataset("mnli", "dev_matched", tmp_path, download=False)
    assert d.class_names == ("entailment", "neutral", "contradiction") and d.num_classes == 3
    assert d.texts == ("The bridge is old.", "Prices rose in May.")  # the '-' row is skipped...
    assert d.meta["text_pairs"] == ("The bridge was built long ago.", "Prices fell in May.")
    assert d.labels.tolist() == [0, 2] and d.meta["skipped_no_gold"] == 1  # ...and counted
    assert text.sentence_pairs(d) == (d.texts, d.meta["text_pairs"])
    assert len(d.checksum) == 64 and load_dataset("mnli", "dev_matched", tmp_path).checksum == d.checksum
    _write(tmp_path, "text/MNLI/train.tsv", mnli_tsv("train"))
    tr = load_dataset("mnli", "train", tmp_path, download=False)
    assert tr.texts[0] == 'He said "no" twice.'  # bare quotes kept: no CSV quoting
    assert tr.texts[2] == "Tabs\\tstay escaped; a stray \r stays too."  # split on \n and \t only
    assert tr.labels.tolist() == [0, 2, 1] and tr.meta["skipped_no_gold"] == 0


def test_mnli_pairs_encode_as_tokenizer_pairs(tmp_path) -> None:
    from transformers import BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "bridge", "is", "old", "."]
    tok = BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    _write(tmp_path, "text/MNLI/dev_matched.tsv", mnli_tsv("dev_matched"))
    premises, hypotheses = text.sentence_pairs(load_dataset("mnli", "dev_matched", tmp_path))
    enc = tok(list(premises), list(hypotheses), padding=True)
    assert tok.decode(enc["input_ids"][0]).startswith("[CLS] the bridge is old. [SEP]")
    assert enc["token_type_ids"][0].count(1) > 0  # the hypothesis is the second segment


def test_mnli_subset_pairs_and_bad_rows_are_refused(tmp_path) -> None:
    _write(tmp_path, "text/MNLI/dev_matched.tsv", mnli_tsv("dev_matched"))
    d = load_dataset("mnli", "dev_matched", tmp_path)
    with pytest.raises(ConfigError, match="not aligned"):
        text.sentence_pairs(d.subset(np.array([1, 0]), "swap"))
    path = Path("x/dev_matched.tsv")
    with pytest.raises(DataMissingError, match="no gold_label column"):
        text.parse_mnli_tsv(mnli_tsv("test_matched", _MNLI_ROWS["train"]).splitlines(), path)
    bad = [("g", "p", "h", "maybe")]
    with pytest.raises(CacheCorruptError, match="line 2 has gold_label 'maybe'"):
        text.parse_mnli_tsv(mnli_tsv("dev_matched", bad).splitlines(), path)
    extra_tab = mnli_tsv("dev_matched", [("g", "p\tq", "h", "neutral")]).splitlines()
    with pytest.raises(CacheCorruptError, match="line 2 has 17 tab-separated fields, the header 16"):
        text.parse_mnli_tsv(extra_tab, path)


def test_mnli_fetch_verifies_extracts_and_loads(tmp_path, fake_remote, server, online, capsys) -> None:  # noqa: F811
    root = tmp_path / "data"
    out = fake_remote.fetch(root, "mnli", "MNLI.zip", mnli_zip(), "sha256", "text")
    assert "sha256" in out and "verified" in out
    manifest = (root / "text" / "MNLI" / "MANIFEST.sha256").read_text()
    recorded = sorted(line.split()[1] for line in manifest.splitlines() if not line.startswith("#"))
    assert recorded == ["dev_matched.tsv", "dev_mismatched.tsv", "train.tsv"]
    counts = {s: len(load_dataset("mnli", s, root, download=False)) for s in text.MNLI_SPLITS}
    assert counts == {"train": 3, "dev_matched": 2, "dev_mismatched": 1}
    mm = load_dataset("mnli", "dev_mismatched", root, download=False)
    assert text.sentence_pairs(mm) == (("Dear friend, thanks.",), ("The letter is rude.",))
    assert mm.labels.tolist() == [2]
    # Present now: a second fetch verifies and downloads nothing.
    rc, out = fetch_cli(capsys, "mnli", "--data-root", str(root))
    assert rc == 0 and "nothing downloaded" in out and server[2] == ["/MNLI.zip"]
    # A file changed after extraction is refused before it is parsed.
    (root / "text" / "MNLI" / "train.tsv").write_text(mnli_tsv("train", _MNLI_ROWS["dev_mismatched"]))
    with pytest.raises(ChecksumError, match=r"sha256 mismatch for .*MNLI/train\.tsv"):
        load_dataset("mnli", "train", root, download=False)


def test_mnli_loader_downloads_when_allowed(tmp_path, monkeypatch, server, online) -> None:  # noqa: F811
    body = mnli_zip()
    serve_remote(monkeypatch, server, "mnli", "MNLI.zip", body, hashlib.sha256(body).hexdigest())
    d = load_dataset("mnli", "dev_matched", tmp_path, download=True)
    assert d.labels.tolist() == [0, 2] and server[2] == ["/MNLI.zip"]


def test_mnli_corrupted_zip_is_refused(tmp_path, fake_remote, online) -> None:  # noqa: F811
    out = fake_remote.fetch_cut_off(tmp_path / "data", "mnli", "MNLI.zip", mnli_zip(), "sha256")
    assert "sha256 mismatch" in out


def test_mnli_absent_offline_names_the_fetch_command(tmp_path) -> None:
    from benchmark.tables import availability

    with pytest.raises(DataMissingError) as err:
        load_dataset("mnli", "train", tmp_path)  # FLB_OFFLINE=1 (conftest): no download tried
    msg = str(err.value)
    assert "`flb data fetch mnli`" in msg and str(tmp_path / "text" / "MNLI") in msg and "train.tsv" in msg
    assert text.MNLI_URL in msg and "FLB_DATA_ROOT" in msg and "\n" not in msg
    availability.clear_caches()
    try:
        reason = availability.dataset_blocker("mnli", str(tmp_path))
    finally:
        availability.clear_caches()
    assert reason is not None and f"`flb data fetch mnli --data-root {tmp_path}`" in reason.render()
    assert reason.command == f"flb data fetch mnli --data-root {tmp_path}" and reason.missing == "mnli"
