"""Text classification datasets: AG News, SST-2 (GLUE), SST-5 (Stanford Sentiment Treebank) and MNLI (GLUE).

Layout under the data root (the same as this project's ``shared/data/text/``, so its ``MANIFEST.sha256``,
whose paths start with ``text/``, verifies the files as they are):

=============  ================================================================================
``ag_news``    ``text/ag_news_csv/{train,test}.csv`` (official CSVs: class 1-4, title, description);
               or ``text/ag_news_csv/hf_{train,test}.csv`` exported from Hugging Face ``ag_news``
``sst2``       ``text/SST-2/{train,dev,test}.tsv`` (GLUE) or ``text/sst2_glue_reformatted/...`` (the
               same content with the columns swapped, ``label<TAB>sentence``, and a labelled test)
``sst5``       ``text/sst_trees/{train,dev,test}.txt`` or ``text/trees/...`` (PTB trees, as in
               ``trainDevTestTrees_PTB.zip``)
``mnli``       ``text/MNLI/{train,dev_matched,dev_mismatched}.tsv`` (GLUE's ``MNLI.zip``, extracted);
               sentence pairs: ``texts`` are the premises, ``meta["text_pairs"]`` the hypotheses
=============  ================================================================================

Every file is verified before it is parsed (a ``MANIFEST.sha256`` beside the data, or the official md5
where one is published: AG News' CSVs, the values torchtext checks). A split's ``checksum`` is
``sha256("flb-text-v1 <dataset> <split> <parse rule> <file digest>")``, so it pins the exact bytes read and
the parsing convention.

Downloads run only when the files are absent and ``download`` allows it (or ``flb data fetch NAME``),
through :mod:`benchmark.data.download`, each file checked before it is used: AG News' official CSVs
(torchtext's URLs and md5), SST-2 from GLUE's ``SST-2.zip`` (torchtext's md5), SST-5 from the Stanford
Sentiment Treebank's ``trainDevTestTrees_PTB.zip`` (a pinned sha256), MNLI from GLUE's ``MNLI.zip`` (the
sha256 Hugging Face ``datasets``' ``glue`` pins); the extracted SST and MNLI files are then recorded in the
folder's ``MANIFEST.sha256``.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from benchmark.data.dataset import DatasetSplit, register_dataset
from benchmark.data.fetch import ensure_present, network_reachable, public_downloader, verify_dataset_files
from benchmark.data.folders import bad_file, read_verified_text
from benchmark.errors import CacheCorruptError, ConfigError, DataMissingError
from benchmark.io import sha256_bytes

IDENTITY_VERSION = "flb-text-v1"

AG_FOLDER = "text/ag_news_csv"
AG_MD5 = {  # torchtext.datasets.AG_NEWS (the official CSVs)
    "train.csv": "b1a00f826fdfbd249f79597b59e1dc12",
    "test.csv": "d52ea96a97a2d943681189a97654912d",
}
AG_CLASSES = ("World", "Sports", "Business", "Sci/Tech")  # classes.txt, class index 1..4
SST2_FOLDERS = ("text/SST-2", "text/sst2_glue_reformatted")
SST2_URL = "https://dl.fbaipublicfiles.com/glue/data/SST-2.zip"
SST2_ZIP_MD5 = "9f81648d4199384278b86e315dac217c"  # torchtext.datasets.SST2
SST2_CLASSES = ("negative", "positive")
SST5_FOLDERS = ("text/sst_trees", "text/trees")
SST5_URL = "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip"
# No official checksum is published; this sha256 (789,539 bytes) is the one Flux.jl's Data.Sentiment pins.
SST5_ZIP_SHA256 = "5c613a4f673fc74097d523a2c83f38e0cc462984d847b82c7aaf36b01cbbbfcc"
SST5_CLASSES = ("very negative", "negative", "neutral", "positive", "very positive")
MNLI_FOLDERS = ("text/MNLI",)
MNLI_URL = "https://dl.fbaipublicfiles.com/glue/data/MNLI.zip"
# torchtext.datasets.MNLI downloads multinli_1.0.zip (not GLUE's TSVs), so it pins no checksum of this file.
# This sha256 (312,783,507 bytes) is the one Hugging Face datasets' glue/dataset_infos.json records for this
# URL (download_checksums of the mnli configs); TFDS's url_checksums/glue.txt has the same value and size
# for GLUE's earlier firebasestorage URL of MNLI.zip.
MNLI_ZIP_SHA256 = "e7c1d896d26ed6caf700110645df426cc2d8ebf02a5ab743d5a5c68ac1c83633"
MNLI_CLASSES = ("entailment", "neutral", "contradiction")  # gold_label -> 0, 1, 2 (HF glue, torchtext)
MNLI_SPLITS = ("train", "dev_matched", "dev_mismatched")

_HOW_AG = (
    "run `flb data fetch ag_news` (needs network), or put the official AG News CSVs (ag_news_csv.tgz of "
    f"Zhang et al. 2015; torchtext md5 train {AG_MD5['train.csv']}, test {AG_MD5['test.csv']}) in "
    "text/ag_news_csv/"
)
_HOW_SST2 = (
    f"run `flb data fetch sst2` (needs network), or extract GLUE's SST-2.zip ({SST2_URL}) into text/ "
    "(giving text/SST-2/*.tsv) and list the .tsv files in MANIFEST.sha256"
)
_HOW_SST5 = (
    f"run `flb data fetch sst5` (needs network), or extract {SST5_URL} into text/ (giving text/trees/*.txt; "
    "text/sst_trees/ also works) and list the .txt files in MANIFEST.sha256"
)
_HOW_MNLI = (
    f"run `flb data fetch mnli` (needs network), or extract GLUE's MNLI.zip ({MNLI_URL}, sha256 "
    f"{MNLI_ZIP_SHA256}) into text/ (giving text/MNLI/*.tsv) and list the .tsv files in MANIFEST.sha256"
)


# ------------------------------------------------------------------------------------------ helpers


def _may_download(download: bool | None) -> bool:
    return download is True or (download is None and network_reachable())


def _locate(
    root: Path,
    folders: Sequence[str],
    name: str,
    *,
    dataset: str,
    download: bool | None,
    downloader: Callable[[Path], None] | None,
    how_to_get: str,
) -> str:
    """The first of ``folders`` holding ``name``; else download; else one clear DataMissingError."""
    for _ in range(2):
        for folder in folders:
            if (root / folder / name).is_file():
                return folder
        if downloader is None or not _may_download(download):
            break
        downloader(root)
        downloader = None
    also = f" (or {', '.join(f'{f}/' for f in folders[1:])})" if len(folders) > 1 else ""
    ensure_present(
        root, folders[0], [name], dataset=dataset, download=False, downloader=None,
        how_to_get=how_to_get + also,
    )  # fmt: skip
    raise AssertionError("unreachable")  # pragma: no cover - ensure_present raised


def _verified_file(
    root: Path, dataset: str, folders: Sequence[str], name: str, *, download: bool | None, how_to_get: str
) -> tuple[str, str, Path]:
    """``(folder, digest, path)`` of the file ``name`` of ``dataset``: found in the first of ``folders`` that
    holds it, or downloaded (:func:`_locate`), then verified (checksums before anything is read)."""
    folder = _locate(
        root, folders, name, dataset=dataset, download=download, downloader=public_downloader(dataset),
        how_to_get=how_to_get,
    )  # fmt: skip
    return folder, verify_dataset_files(root, folder, [name]), root / folder / name


def _identity(dataset: str, split: str, rule: str, digest: str) -> str:
    return sha256_bytes(f"{IDENTITY_VERSION} {dataset} {split} {rule} {digest}".encode())


def _text_split(
    name: str, split: str, texts: list[str], labels: list[int], classes: Sequence[str], checksum: str,
    meta: dict[str, object],
) -> DatasetSplit:  # fmt: skip
    return DatasetSplit(
        name,
        split,
        np.asarray(labels, dtype=np.int64),
        tuple(classes),
        checksum,
        texts=tuple(texts),
        meta=meta,
    )


# ------------------------------------------------------------------------------------------- AG News


def parse_ag_news_official(text: str, path: Path) -> tuple[list[str], list[int]]:
    """Rows ``"class","title","description"`` (class 1-4) -> texts ``title + " " + description``, labels 0-3.

    The text convention is Hugging Face ``ag_news``'s (``" ".join((title, description))``, escapes kept as
    in the file), so the official CSV and the Hugging Face download give the same texts.
    """
    texts, labels = [], []
    for lineno, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
        if not row:
            continue
        if len(row) != 3 or not row[0].strip().isdigit() or not 1 <= int(row[0]) <= 4:
            raise bad_file(path, f"row {lineno} is not 'class(1-4),title,description'")
        labels.append(int(row[0]) - 1)
        texts.append(f"{row[1]} {row[2]}")
    return texts, labels


def parse_ag_news_hf(text: str, path: Path) -> tuple[list[str], list[int]]:
    """The ``label,text`` CSV (labels 0-3) of a Hugging Face ``ag_news`` export (earlier downloads wrote it)."""
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if reader.fieldnames != ["label", "text"]:
        raise bad_file(path, f"expected header 'label,text', found {reader.fieldnames}")
    texts, labels = [], []
    for lineno, row in enumerate(reader, 2):
        if not (row["label"] or "").isdigit() or not 0 <= int(row["label"]) <= 3:
            raise bad_file(path, f"row {lineno} has label {row['label']!r}, expected 0-3")
        labels.append(int(row["label"]))
        texts.append(row["text"])
    return texts, labels


@register_dataset(
    "ag_news",
    num_classes=4,
    modality="text",
    expected_layout=f"{AG_FOLDER}/{{train,test}}.csv (or hf_{{train,test}}.csv from the Hugging Face download)",
    source="Zhang et al. 2015 (AG's News, 120,000 / 7,600); legate2023 text experiments (HF 'ag_news')",
)
def load_ag_news(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """AG News ``train`` (120,000) or ``test`` (7,600), 4 classes; texts as Hugging Face ``ag_news``.

    The official CSV ``text/ag_news_csv/<split>.csv`` is used when present (checked against the official
    md5 or a manifest); else a Hugging Face export ``hf_<split>.csv`` (``label,text``, listed in a
    manifest); else, when allowed, the official CSVs are downloaded (:mod:`benchmark.data.download`,
    torchtext's URLs and md5). legate2023's code calls ``datasets.load_dataset("ag_news")``, whose texts are
    the same ``title + " " + description``.
    """
    official, hf = f"{split}.csv", f"hf_{split}.csv"
    if (root / AG_FOLDER / official).is_file():
        name, parse, source = official, parse_ag_news_official, "official csv"
    elif (root / AG_FOLDER / hf).is_file():
        name, parse, source = hf, parse_ag_news_hf, "huggingface ag_news"
    else:
        ensure_present(
            root, AG_FOLDER, [official], dataset="ag_news", download=download,
            downloader=public_downloader("ag_news"), how_to_get=_HOW_AG,
        )  # fmt: skip
        name, parse, source = official, parse_ag_news_official, "official csv"
    digest = verify_dataset_files(root, AG_FOLDER, [name], AG_MD5)
    path = root / AG_FOLDER / name
    texts, labels = parse(read_verified_text(path), path)
    checksum = _identity("ag_news", split, f"{source}:title+' '+description", digest)
    return _text_split(
        "ag_news", split, texts, labels, AG_CLASSES, checksum, {"source": source, "file": name}
    )


# ---------------------------------------------------------------------------------------------- SST-2


_SENTENCE_HEADERS = {"sentence", "content", "text"}


def parse_sst2_tsv(text: str, path: Path) -> tuple[list[str], list[int]]:
    """GLUE SST-2 TSV -> (sentences, labels 0/1), in either column order.

    A header row (``sentence<TAB>label`` in GLUE, ``label<TAB>content``/``label<TAB>sentence`` in the
    swapped copy) names the columns; without a header, the column holding ``0``/``1`` in the first row
    is the label. GLUE's unlabelled test file (``index<TAB>sentence``) is refused.
    """
    lines = [ln.rstrip("\r") for ln in text.split("\n")]
    lines = [ln for ln in lines if ln.strip()]
    if not lines:
        raise bad_file(path, "empty file")
    first = lines[0].split("\t")
    names = [c.strip().lower() for c in first]
    if "label" in names and _SENTENCE_HEADERS & set(names):
        label_col = names.index("label")
        text_col = next(i for i, c in enumerate(names) if c in _SENTENCE_HEADERS)
        body = lines[1:]
    elif _SENTENCE_HEADERS & set(names) or "index" in names:
        raise DataMissingError(
            f"{path} has no label column (GLUE's SST-2 test labels are not public)",
            "use the 'dev' split for evaluation, or a labelled copy of the test split",
        )
    elif len(first) == 2 and first[0].strip() in ("0", "1"):
        label_col, text_col, body = 0, 1, lines
    elif len(first) == 2 and first[1].strip() in ("0", "1"):
        label_col, text_col, body = 1, 0, lines
    else:
        raise bad_file(path, "cannot tell the label column (no header, no 0/1 column)")
    texts, labels = [], []
    for lineno, line in enumerate(body, 2 if body is not lines else 1):
        parts = line.split("\t")
        if len(parts) != len(first) or parts[label_col].strip() not in ("0", "1"):
            raise bad_file(path, f"line {lineno} is not '<sentence><TAB><0|1>' in the header's order")
        labels.append(int(parts[label_col]))
        texts.append(parts[text_col])
    return texts, labels


@register_dataset(
    "sst2",
    num_classes=2,
    modality="text",
    splits=("train", "dev", "test"),
    expected_layout="text/SST-2/{train,dev,test}.tsv (or text/sst2_glue_reformatted/)",
    source="Socher et al. 2013 via GLUE (Wang et al. 2019), 67,349 / 872; bernier2024 Table 4.1",
)
def load_sst2(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """GLUE SST-2 ``train`` (67,349), ``dev`` (872) or ``test`` (1,821; labelled only in some copies).

    Reads ``text/SST-2/<split>.tsv`` (GLUE) or ``text/sst2_glue_reformatted/<split>.tsv``; see
    :func:`parse_sst2_tsv` for the column handling.
    """
    folder, digest, path = _verified_file(
        root, "sst2", SST2_FOLDERS, f"{split}.tsv", download=download, how_to_get=_HOW_SST2
    )
    texts, labels = parse_sst2_tsv(read_verified_text(path), path)
    checksum = _identity("sst2", split, "glue-tsv", digest)
    return _text_split("sst2", split, texts, labels, SST2_CLASSES, checksum, {"folder": folder})


# ---------------------------------------------------------------------------------------------- SST-5

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")"}


def parse_ptb_tree(line: str) -> tuple[str, int]:
    """One PTB sentiment tree -> (sentence, root label 0-4).

    The sentence is the leaves joined by single spaces, with ``-LRB-``/``-RRB-`` written as ``(``/``)``.
    Raises ``ValueError`` on a malformed tree.
    """
    tokens = _TOKEN.findall(line)
    if len(tokens) < 4 or tokens[0] != "(" or not tokens[1].isdigit():
        raise ValueError("does not start with '(<label>'")
    label = int(tokens[1])
    if not 0 <= label <= 4:
        raise ValueError(f"root label {label} outside 0-4")
    leaves, depth, prev = [], 0, ""
    for tok in tokens:
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced parentheses")
        elif prev != "(":
            leaves.append(_PTB_ESCAPES.get(tok, tok))
        prev = tok
    if depth != 0 or not leaves:
        raise ValueError("unbalanced parentheses or no words")
    return " ".join(leaves), label


def parse_sst_trees(text: str, path: Path) -> tuple[list[str], list[int]]:
    """A file of one PTB tree per line -> (sentences, root labels 0-4)."""
    texts, labels = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            sentence, label = parse_ptb_tree(line)
        except ValueError as exc:
            raise bad_file(path, f"line {lineno}: {exc}") from exc
        texts.append(sentence)
        labels.append(label)
    return texts, labels


@register_dataset(
    "sst5",
    num_classes=5,
    modality="text",
    splits=("train", "dev", "test"),
    expected_layout="text/sst_trees/{train,dev,test}.txt (or text/trees/)",
    source="Socher et al. 2013 (SST-5 root labels), 8,544 / 1,101 / 2,210; bernier2024 Table 4.1",
)
def load_sst5(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """SST-5: the root label (0-4) of each PTB tree of ``train``/``dev``/``test`` (8,544 / 1,101 / 2,210)."""
    folder, digest, path = _verified_file(
        root, "sst5", SST5_FOLDERS, f"{split}.txt", download=download, how_to_get=_HOW_SST5
    )
    texts, labels = parse_sst_trees(read_verified_text(path), path)
    checksum = _identity("sst5", split, "ptb-root-label,lrb-rrb->parens", digest)
    return _text_split("sst5", split, texts, labels, SST5_CLASSES, checksum, {"folder": folder})


# ----------------------------------------------------------------------------------------------- MNLI


_MNLI_COLUMNS = ("sentence1", "sentence2", "gold_label")


def _verified_lines(path: Path) -> Iterator[str]:
    """The lines of a verified UTF-8 file, streamed, split on ``\\n`` only (a stray ``\\r`` or U+2028 inside
    a sentence stays in it); the line end is removed."""
    try:
        with open(path, encoding="utf-8", newline="\n") as f:
            for line in f:
                yield line.rstrip("\n").removesuffix("\r")
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheCorruptError(f"cannot read {path}: {exc}", "delete it and re-create the data") from exc


def parse_mnli_tsv(lines: Iterable[str], path: Path) -> tuple[list[str], list[str], list[int], int]:
    """GLUE MNLI TSV -> (premises, hypotheses, labels, rows skipped for having no gold label).

    The header names the columns (GLUE: ``index promptID pairID genre sentence1_binary_parse
    sentence2_binary_parse sentence1_parse sentence2_parse sentence1 sentence2 label1 [label2..label5]
    gold_label``); ``sentence1`` is the premise, ``sentence2`` the hypothesis, ``gold_label`` the class
    (entailment 0, neutral 1, contradiction 2). Fields are split on tabs with no quoting (the files hold
    bare ``"``), as Hugging Face ``glue`` reads them (``csv.QUOTE_NONE``). Rows whose gold label is ``-``
    (no annotator majority; MultiNLI 1.0 has them, GLUE's files have none) are skipped and counted; any
    other label, or a row whose field count differs from the header's, is one clear error. GLUE's
    unlabelled ``test_*.tsv`` (no ``gold_label`` column) is refused.
    """
    it = iter(lines)
    header = next(it, "").split("\t")
    if not {"sentence1", "sentence2"} <= set(header):
        raise bad_file(path, f"header has no sentence1/sentence2 columns: {header[:12]}")
    if "gold_label" not in header:
        raise DataMissingError(
            f"{path} has no gold_label column (GLUE's MNLI test labels are not public)",
            "use the 'dev_matched' split for evaluation (MeZO / LM-BFF test MNLI on it)",
        )
    p_col, h_col, y_col = (header.index(c) for c in _MNLI_COLUMNS)
    index = {name: i for i, name in enumerate(MNLI_CLASSES)}
    premises, hypotheses, labels, skipped = [], [], [], 0
    for lineno, line in enumerate(it, 2):
        if not line:
            continue
        parts = line.split("\t")
        if len(parts) != len(header):
            raise bad_file(
                path, f"line {lineno} has {len(parts)} tab-separated fields, the header {len(header)}"
            )
        gold = parts[y_col]
        if gold == "-":
            skipped += 1
            continue
        if gold not in index:
            raise bad_file(
                path, f"line {lineno} has gold_label {gold!r}, expected one of {MNLI_CLASSES} or '-'"
            )
        premises.append(parts[p_col])
        hypotheses.append(parts[h_col])
        labels.append(index[gold])
    return premises, hypotheses, labels, skipped


@register_dataset(
    "mnli",
    num_classes=3,
    modality="text",
    splits=MNLI_SPLITS,
    expected_layout="text/MNLI/{train,dev_matched,dev_mismatched}.tsv (GLUE's MNLI.zip, extracted)",
    source="Williams et al. 2018 (MultiNLI) via GLUE, 392,702 / 9,815 / 9,832; bernier2024 Table 4.1-4.2",
)
def load_mnli(root: Path, split: str, download: bool | None = None) -> DatasetSplit:
    """GLUE MNLI ``train`` (392,702), ``dev_matched`` (9,815) or ``dev_mismatched`` (9,832), 3 classes.

    A sentence-pair task: ``texts`` holds the premises (``sentence1``) and ``meta["text_pairs"]`` the
    hypotheses (``sentence2``), a tuple of the same length and order, so a Hugging Face tokenizer encodes
    the pair as ``tokenizer(list(d.texts), list(d.meta["text_pairs"]), ...)`` (see :func:`sentence_pairs`).
    Labels: entailment 0, neutral 1, contradiction 2 (``class_names`` in that order; Hugging Face ``glue``
    and torchtext use the same). ``meta["skipped_no_gold"]`` counts rows with gold label ``-``.
    GLUE's test labels are not public; MeZO / LM-BFF (Malladi et al. 2023, Gao et al. 2021) report MNLI on
    ``dev_matched``, which is this loader's evaluation split.
    """
    folder, digest, path = _verified_file(
        root, "mnli", MNLI_FOLDERS, f"{split}.tsv", download=download, how_to_get=_HOW_MNLI
    )
    premises, hypotheses, labels, skipped = parse_mnli_tsv(_verified_lines(path), path)
    checksum = _identity("mnli", split, "glue-tsv:sentence1,sentence2,gold_label", digest)
    meta: dict[str, object] = {
        "folder": folder, "text_pairs": tuple(hypotheses), "skipped_no_gold": skipped,
        "pair_columns": ("sentence1", "sentence2"),
    }  # fmt: skip
    return _text_split("mnli", split, premises, labels, MNLI_CLASSES, checksum, meta)


def sentence_pairs(data: DatasetSplit) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(premises, hypotheses)`` of a sentence-pair split (``texts`` and ``meta["text_pairs"]``).

    :meth:`DatasetSplit.subset` picks ``texts`` but copies ``meta`` unchanged, so the hypotheses of a
    subset would no longer line up; such a split is refused (index the full split's two tuples instead).
    """
    pairs = data.meta.get("text_pairs")
    if data.texts is None or pairs is None:
        raise ConfigError(
            f"{data.name}/{data.split} is not a sentence-pair split", "use a pair dataset (mnli)"
        )
    if "subset" in data.meta or len(pairs) != len(data.texts):  # type: ignore[arg-type]
        raise ConfigError(
            f"{data.name}/{data.split}: meta['text_pairs'] is not aligned with texts (subset() copies meta as is)",
            "select examples by indexing the full split's texts and meta['text_pairs'] with the same indices",
        )
    return data.texts, tuple(pairs)  # type: ignore[arg-type]
