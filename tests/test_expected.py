"""expected/ (reported paper tables): schema, cell counts, flagged readings, provenance; verdict.py branches."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmark.errors import BenchmarkError, ConfigError, UnknownNameError
from benchmark.expected import (
    EXPECTED_ROOT,
    METRICS,
    PAPERS,
    ReportedCell,
    cell_counts,
    list_tables,
    load_all,
    load_table,
    parse_printed_accuracy,
    parse_printed_number,
)
from benchmark.papers import PAPER_FILES, papers_dir
from benchmark.reasons import NotRunReason, ReasonKind
from benchmark.verdict import (
    ACCURACY_FLOOR,
    SUBSTITUTE_TOLERANCE,
    Status,
    judge,
    ours_stats,
    round_like_printed,
)

# Cells per table, established by reading the five documents (see expected/README.md for what each holds).
EXPECTED_COUNTS: dict[str, int] = {
    "legate2023/table1": 10,  # 5 datasets x (classes, images)
    "legate2023/table2": 90,  # 30 rows x (accuracy, compute, comm)
    "legate2023/table3": 18,  # 2 datasets x 3 algorithms x 3 methods
    "legate2023/table4": 24,  # 6 rows x 4 methods (rounds)
    "legate2023/table5": 10,
    "legate2023/table6": 8,
    "legate2023/table7": 4,
    "legate2023/table8": 8,
    "legate2023ws/table1": 57,  # 19 rows x 3 (no Cars/EuroSAT, no FedNCM+FT on CIFAR-10 x32)
    "legate2023ws/table2": 12,
    "legate2023ws/tableB": 10,
    "legate2023ws/tableE_4": 8,
    "fedcof/table1": 0,  # qualitative (3 rows, symbolic costs)
    "fedcof/table2": 8,
    "fedcof/table3": 120,  # 5 datasets x 4 methods x 3 models x (acc, comm)
    "fedcof/table4": 24,
    "fedcof/table5": 10,
    "fedcof/table6": 40,
    "fedcof/table7": 32,
    "fedcof/table8": 16,
    "fedcof/table9": 10,
    "bernier2024/table3_1": 10,
    "bernier2024/table3_2": 90,
    "bernier2024/table3_3": 18,
    "bernier2024/table4_1": 30,  # 12 rows x (acc, comm) + 6 FedMeZO round counts
    "bernier2024/table4_2": 6,
    "bernier2024/tableA_1": 24,
    "bernier2024/tableA_2": 10,
    "bernier2024/tableA_3": 8,
    "bernier2024/tableA_4": 4,
    "bernier2024/tableA_5": 8,
    "fedbabu/table1": 36,
    "fedbabu/table2": 30,
    "fedbabu/table3": 0,  # absent from the text conversion
    "fedbabu/table4": 54,
    "fedbabu/table5": 129,  # 18 rows x 7 methods + 3 local-only
    "fedbabu/table6": 36,
    "fedbabu/table7": 36,
    "fedbabu/table8": 9,
    "fedbabu/table9": 36,
    "fedbabu/table10": 48,
    "fedbabu/table11": 72,
    "fedbabu/table12": 72,
    "fedbabu/table13": 129,
    "fedbabu/table14": 90,
    "fedbabu/table15": 90,
    "fedbabu/table16": 36,
    "fedbabu/table17": 36,
    "fedbabu/table18": 16,
    "fedbabu/table19": 24,
    "fedbabu/table20": 96,
    "fedbabu/table21": 18,
    "fedbabu/table22": 36,
    "fedbabu/table23": 12,
    "fedbabu/table24": 36,
    "fedbabu/table25": 105,
}

_WS = [f"{d}/{m}/{k}" for d in ("cifar10", "flowers102", "cub200") for m in ("ft", "fedncm_ft", "lp")
       for k in ("compute_f", "comm_gb")]  # fmt: skip
# Cells that must carry several readings (garbled conversion, or the two legate2023 versions disagree).
FLAGGED: dict[str, set[str]] = {
    "legate2023/table2": {
        *_WS,
        "cifar10/random/comm_gb",
        "cifar10/fedncm/comm_gb",
        "cifar10_32/random/compute_f",
        "cifar10_32/random/comm_gb",
        "cifar10_32/ft/compute_f",
        "cifar10_32/ft/comm_gb",
        "cifar10_32/lp/compute_f",
        "cifar10_32/lp/comm_gb",
        "cifar10_32/fedncm/accuracy",
        "cifar10_32/fedncm/comm_gb",
        "flowers102/random/compute_f",
        "flowers102/random/comm_gb",
        "flowers102/fedncm/comm_gb",
        "cub200/random/compute_f",
        "cub200/random/comm_gb",
        "cub200/fedncm/comm_gb",
        "eurosat_sub/fedncm/comm_gb",
    },
    "legate2023/table6": {"flowers102/ft"},
    "bernier2024/tableA_3": {"flowers102/ft"},
    "legate2023ws/table2": {"cifar10/fedavg/ft", "cifar10/fedadam/fedncm_ft", "cifar10/fedadam/ft"},
}

PAPER_DOCS = PAPER_FILES  # benchmark.papers: short id -> text file
PAPERS_DIR = papers_dir()


@pytest.fixture(scope="module")
def tables() -> dict[str, Any]:
    return {t.name: t for t in load_all()}


# ------------------------------------------------------------------------------------------ counts, schema
def test_every_table_is_listed_and_no_cell_goes_missing(tables: dict[str, Any]) -> None:
    assert [f"{p}/table{t}" for p, t in list_tables()] == list(EXPECTED_COUNTS)
    assert cell_counts() == EXPECTED_COUNTS
    assert sum(EXPECTED_COUNTS.values()) == 2009


@pytest.mark.parametrize("name", list(EXPECTED_COUNTS))
def test_table_schema(tables: dict[str, Any], name: str) -> None:
    t = tables[name]
    assert t.kind == "reported"
    assert t.source.paper == t.paper and t.paper in PAPERS
    assert t.source.document == PAPER_DOCS[t.paper]
    assert t.source.caption.strip()
    for c in t.cells:
        assert c.metric in METRICS and c.unit in METRICS[c.metric][1]
        assert c.row is not None and c.column
        proto = c.protocol
        assert "dataset" in proto, c.key
        if c.metric == "accuracy":
            assert "method" in proto, c.key
            assert c.std_over in ("seeds", "clients", "unknown")
            if c.paper == "fedbabu":
                assert c.std_over == "clients" and c.n_seeds is None, c.key
            if c.std_over == "seeds":
                assert c.n_seeds is not None, c.key
        else:
            assert c.std is None and c.comparison == "exact"
        part = proto.get("partition")
        if part is not None:
            assert part["kind"] in ("dirichlet", "shards", "natural", "domain"), c.key
        assert proto.get("pretrained") in (None, "none", "imagenet1k", "roberta-large"), c.key
        if proto.get("method") == "random":  # "initialized at random with no use of pre-trained model"
            assert proto["pretrained"] == "none", c.key
        if c.provenance is not None:  # quoted from another paper: this paper's seed count does not apply
            assert c.n_seeds is None and proto.get("n_seeds") is None, c.key


def test_fedbabu_labels_agree_with_protocol(tables: dict[str, Any]) -> None:
    """s=, f= and τ= in a FedBABU cell's labels are its shards per user, participation and local epochs; rounds x
    local epochs is the total epoch budget; 'Initial' cells are not fine-tuned."""
    wrong = []
    for t in tables.values():
        if t.paper != "fedbabu":
            continue
        for c in t.cells:
            p, labels = c.protocol, " | ".join(c.row + c.column)
            local_only = p.get("method") == "local_only"  # printed once per s, on the f=1.0, τ=1 row
            s = re.search(r"(?<![\w])s\s*=\s*(\d+)", labels)
            if s and (p.get("partition") or {}).get("shards_per_user") != int(s.group(1)):
                wrong.append((c.key, "s"))
            f = re.search(r"\bf\s*=\s*([\d.]+)", labels)
            if f and not local_only and p.get("participation") != float(f.group(1)):
                wrong.append((c.key, "f"))
            tau = re.search(r"τ\s*=\s*(\d+)", labels)
            if tau and not local_only and p.get("local_epochs") != int(tau.group(1)):
                wrong.append((c.key, "tau"))
            if p.get("rounds") and p.get("local_epochs") and p.get("total_epochs"):
                if p["rounds"] * p["local_epochs"] != p["total_epochs"]:
                    wrong.append((c.key, "rounds x tau"))
            if p.get("stage") == "initial" and p.get("finetune_epochs") not in (0, None):
                wrong.append((c.key, "initial but fine-tuned"))
    assert wrong == []


def test_missing_and_qualitative_tables(tables: dict[str, Any]) -> None:
    babu3 = tables["fedbabu/table3"]
    assert babu3.missing and not babu3.cells and babu3.notes
    cof1 = tables["fedcof/table1"]
    assert not cof1.missing and not cof1.cells
    assert {q["method"]: q["comm_cost"] for q in cof1.qualitative} == {
        "fedncm": "d*C*K",
        "fed3r": "(d*C + d^2)*K",
        "fedcof": "d*C*K",
    }


def test_both_readings_exist_where_flagged(tables: dict[str, Any]) -> None:
    for name, t in tables.items():
        with_readings = {c.id for c in t.cells if c.readings}
        assert with_readings == FLAGGED.get(name, set()), name
        for c in t.cells:
            if c.readings:
                assert len(c.readings) >= 2 and c.note
                assert c.used in {r.source for r in c.readings}
                assert next(r for r in c.readings if r.source == c.used).printed == c.printed


def test_specific_ambiguities_are_recorded(tables: dict[str, Any]) -> None:
    eurosat = tables["legate2023/table2"].cell("eurosat_sub/fedncm/comm_gb")
    assert [r.printed for r in eurosat.readings] == ["4..10×10^-3", "4.10×10^-3"]
    assert eurosat.readings[0].value is None and eurosat.used == "bernier2024/table3_2"
    ncm32 = tables["legate2023/table2"].cell("cifar10_32/fedncm/accuracy")
    assert {r.printed for r in ncm32.readings} == {"40.02±0.04", "44.9"} and ncm32.mean == 40.02
    adam = tables["legate2023ws/table2"].cell("cifar10/fedadam/fedncm_ft")
    assert "80.4±1.1" in {r.printed for r in adam.readings} and adam.mean == 89.4
    vit = tables["fedcof/table3"].cell("inat_120k/vit_b_16/fed3r/comm_mb")
    assert vit.truncated and vit.column_decimals == 1 and vit.printed == "22050."
    t7 = tables["legate2023/table7"]
    assert t7.protocol["model"] is None and len(t7.protocol["model_readings"]) == 2
    assert tables["fedbabu/table18"].protocol["model"] is None


def test_same_as_tables_agree(tables: dict[str, Any]) -> None:
    linked = [t for t in tables.values() if t.same_as]
    assert len(linked) == 11
    for t in linked:
        target = {c.id: c for c in tables[t.same_as].cells}
        for c in t.cells:
            assert c.id in target, (t.name, c.id)
            assert c.printed == target[c.id].printed, (t.name, c.id)


def _norm(text: str) -> str:
    text = re.sub(r"\\overline\{([^{}]*)\}", r"\1", text)
    text = text.replace("\\pm", "±").replace("\\times", "×")
    text = re.sub(r"10\^\{?\s*(-?\d+)\s*\}?", r"10^\1", text)
    for tok in (
        "\\boldsymbol",
        "\\mathbf",
        "\\textbf",
        "\\overline",
        "\\text",
        "\\rm",
        "<b>",
        "</b>",
        "$",
        "\\ ",
    ):
        text = text.replace(tok, "")
    text = text.replace("{", " ").replace("}", " ")
    text = re.sub(r"\s*±\s*", "±", text)
    text = re.sub(r"\s*×\s*", "×", text)
    return re.sub(r"\s+", " ", text)


@pytest.mark.skipif(not PAPERS_DIR.is_dir(), reason=f"paper texts not found at {PAPERS_DIR} (FLB_PAPERS_DIR)")
def test_every_printed_value_occurs_in_its_source_text(tables: dict[str, Any]) -> None:
    texts = {p: _norm((PAPERS_DIR / f).read_text(encoding="utf-8")) for p, f in PAPER_DOCS.items()}

    def found(printed: str, paper: str) -> bool:
        pat = re.escape(_norm(printed))
        if re.search(r"(?<![\d.])" + pat + r"(?!\d)", texts[paper]):
            return True
        # The NeurIPS conversion glues each value to its alt-text copy ("...superscript1084.5\times 10^{8}").
        return paper == "legate2023" and re.search(r"(?<!\.)" + pat + r"(?!\d)", texts[paper]) is not None

    missing = []
    for t in tables.values():
        for c in t.cells:
            paper = t.paper
            if c.readings:
                paper = next(r for r in c.readings if r.source == c.used).paper
                missing += [(c.key, r.printed) for r in c.readings if not found(r.printed, r.paper)]
            if not found(c.printed, paper):
                missing.append((c.key, c.printed))
    assert missing == []


# Where each table sits in its paper's text: the table's caption line (``Table N:`` / ``Table N.`` at the
# start of a line, or right after a figure caption; the two unnumbered workshop tables use the line that
# introduces them) and the first/last line of the table body relative to it. Values must occur inside that
# window, so a value copied from the wrong table, or a table transcribed from the wrong place, fails.
_CAPTION_ANCHOR = {
    "legate2023ws/tableB": r"Details of datasets used in our experimental section",
    "legate2023ws/tableE_4": r"### E\.4\. ResNet18 Experiments",
}
TABLE_WINDOWS: dict[str, tuple[int, int]] = {
    "legate2023/table1": (-5, 0), "legate2023/table2": (-30, 0), "legate2023/table3": (-6, 0),
    "legate2023/table4": (-6, 0), "legate2023/table5": (-10, 0), "legate2023/table6": (-8, 0),
    "legate2023/table7": (-1, 0), "legate2023/table8": (-2, 0),
    "legate2023ws/table1": (-11, 0), "legate2023ws/table2": (-4, 0), "legate2023ws/tableB": (-6, 0),
    "legate2023ws/tableE_4": (0, 7),
    "fedcof/table2": (0, 6), "fedcof/table3": (-21, 0), "fedcof/table4": (0, 10), "fedcof/table5": (0, 7),
    "fedcof/table6": (0, 7), "fedcof/table7": (0, 16), "fedcof/table8": (0, 9), "fedcof/table9": (0, 4),
    "bernier2024/table3_1": (-6, 0), "bernier2024/table3_2": (-31, 0), "bernier2024/table3_3": (-7, 0),
    "bernier2024/table4_1": (-13, 0), "bernier2024/table4_2": (-8, 0), "bernier2024/tableA_1": (-7, 0),
    "bernier2024/tableA_2": (-11, 0), "bernier2024/tableA_3": (-9, 0), "bernier2024/tableA_4": (-2, 0),
    "bernier2024/tableA_5": (-3, 0),
    "fedbabu/table1": (0, 9), "fedbabu/table2": (0, 8), "fedbabu/table4": (0, 13), "fedbabu/table5": (0, 21),
    "fedbabu/table6": (0, 7), "fedbabu/table7": (0, 9), "fedbabu/table8": (0, 5), "fedbabu/table9": (0, 9),
    "fedbabu/table10": (0, 15), "fedbabu/table11": (0, 21), "fedbabu/table12": (0, 21), "fedbabu/table13": (0, 21),
    "fedbabu/table14": (0, 21), "fedbabu/table15": (0, 21), "fedbabu/table16": (0, 12), "fedbabu/table17": (0, 12),
    "fedbabu/table18": (0, 5), "fedbabu/table19": (0, 6), "fedbabu/table20": (0, 16), "fedbabu/table21": (0, 6),
    "fedbabu/table22": (0, 9), "fedbabu/table23": (0, 5), "fedbabu/table24": (0, 9), "fedbabu/table25": (0, 18),
}  # fmt: skip
# Tables whose conversion prints the values column by column (LaTeX arrays), not in the files' row order.
UNORDERED = {"legate2023ws/table1", "legate2023ws/table2", "legate2023ws/tableE_4"}


def _table_window(lines: list[str], name: str) -> str:
    _, number = name.split("/table")
    pattern = _CAPTION_ANCHOR.get(name, rf"(?:^\s*|\)\.)Table {re.escape(number.replace('_', '.'))}[:.] ")
    hits = [i for i, line in enumerate(lines) if re.search(pattern, line)]
    assert len(hits) == 1, f"{name}: caption line not found exactly once ({len(hits)} hits for {pattern!r})"
    first, last = TABLE_WINDOWS[name]
    return _norm("\n".join(lines[hits[0] + first : hits[0] + last + 1]))


def _value_pattern(printed: str, paper: str) -> re.Pattern[str]:
    # The NeurIPS conversion glues each value to its alt-text copy ("...superscript1084.5\times 10^{8}").
    before = r"(?<!\.)" if paper == "legate2023" else r"(?<![\d.])"
    return re.compile(before + re.escape(_norm(printed)) + r"(?!\d)")


@pytest.mark.skipif(not PAPERS_DIR.is_dir(), reason=f"paper texts not found at {PAPERS_DIR} (FLB_PAPERS_DIR)")
def test_values_sit_in_their_table_in_row_order(tables: dict[str, Any]) -> None:
    """Each cell's printed value (and each reading's, in the table it names) lies in its table's window of the
    paper text, and the cells of a table occur there in the order the file lists them (row by row)."""
    lines = {p: (PAPERS_DIR / f).read_text(encoding="utf-8").splitlines() for p, f in PAPER_DOCS.items()}
    with_cells = {n for n, t in tables.items() if t.cells}
    assert set(TABLE_WINDOWS) == with_cells
    windows = {n: _table_window(lines[n.split("/")[0]], n) for n in TABLE_WINDOWS}
    problems = []
    for name, t in tables.items():
        if not t.cells:
            continue
        pos = 0
        for c in t.cells:
            own = [r.printed for r in c.readings if r.source.split("#")[0] == name]
            printed = own[0] if c.readings else c.printed
            for r in c.readings:  # every reading where it says it comes from, when that table is transcribed
                where = r.source.split("#")[0]
                if where in windows and not _value_pattern(r.printed, r.paper).search(windows[where]):
                    problems.append((c.key, r.source, r.printed, "not in that table"))
            if c.readings and not own:
                continue
            pattern = _value_pattern(printed, t.paper)
            if name in UNORDERED:
                if not pattern.search(windows[name]):
                    problems.append((c.key, printed, "not in the table"))
                continue
            m = pattern.search(windows[name], pos)
            if m is None:
                why = "out of row order" if pattern.search(windows[name]) else "not in the table"
                problems.append((c.key, printed, why))
            else:
                pos = m.end()
    assert problems == []


def test_readme_lists_every_table_with_its_count() -> None:
    text = (EXPECTED_ROOT / "README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `([a-z0-9]+/table[0-9A-Za-z_]+)` \| (\d+) \|", text, flags=re.M))
    assert {k: int(v) for k, v in listed.items()} == EXPECTED_COUNTS


# --------------------------------------------------------------------------------------- loader errors
_MINIMAL = textwrap.dedent(
    """\
    source: {document: 001_fcb2cf211ff402fe.txt, paper: legate2023, table: '9', caption: test table}
    kind: reported
    protocol: {model: squeezenet1_1, partition: {kind: dirichlet, alpha: 0.1}}
    cells:
    - id: a/acc
      row: [A]
      column: [Accuracy]
      metric: accuracy
      unit: percent
      printed: 67.8±0.6
      mean: 67.8
      std: 0.6
      n_seeds: 3
      std_over: seeds
      protocol: {dataset: cifar10, method: ft}
    - id: a/comm
      row: [A]
      column: [Comm]
      metric: comm_gb
      unit: GB
      printed: 4.1×10^-3
      mean: 0.0041
      std: null
      n_seeds: null
      std_over: unknown
      protocol: {dataset: cifar10, method: ft}
    """
)


def _write(root: Path, doc: dict[str, Any] | str) -> Path:
    folder = root / "legate2023"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "table9.yaml"
    path.write_text(
        doc if isinstance(doc, str) else yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8"
    )
    return path


def _doc() -> dict[str, Any]:
    return yaml.safe_load(_MINIMAL)


def test_minimal_table_loads_and_merges_protocol(tmp_path: Path) -> None:
    _write(tmp_path, _MINIMAL)
    t = load_table("legate2023", 9, root=tmp_path)
    assert [c.id for c in t.cells] == ["a/acc", "a/comm"]
    acc = t.cell("a/acc")
    assert acc.protocol["model"] == "squeezenet1_1" and acc.protocol["method"] == "ft"
    assert acc.key == "legate2023/table9#a/acc" and acc.comparison == "statistical"
    assert t.cell("a/comm").comparison == "exact"
    assert list_tables(tmp_path) == [("legate2023", "9")]
    assert cell_counts(tmp_path) == {"legate2023/table9": 2}
    with pytest.raises(UnknownNameError, match="no cell"):
        t.cell("nope")


def _mutate(cell: int | None, key: str, value: Any) -> dict[str, Any]:
    d = _doc()
    target = d if cell is None else d["cells"][cell]
    if value is _DELETE:
        del target[key]
    else:
        target[key] = value
    return d


_DELETE = object()
_BAD_CASES = [
    (0, "metric", "acuracy", "metric"),
    (0, "unit", "GB", "unit"),
    (0, "mean", 67.9, "mean"),
    (0, "std", 0.5, "std"),
    (0, "std", _DELETE, "missing field"),
    (0, "colour", "red", "unknown key 'colour'"),
    (0, "printed", 67.8, "printed"),
    (0, "std_over", "runs", "std_over"),
    (1, "std_over", "seeds", "std_over"),
    (0, "n_seeds", 0, "n_seeds"),
    (0, "used", "x", "used"),
    (1, "truncated", True, "column_decimals"),
    (1, "printed", "4.1e-3", "printed"),
    (0, "row", "A", "row"),
    (0, "protocol", {"partition": {"alpha": 0.1}}, "partition"),
    (None, "kind", "pinned", "kind"),
    (None, "extra", 1, "unknown key 'extra'"),
    (None, "cells", [], "cells"),
]


@pytest.mark.parametrize(("cell", "key", "value", "field"), _BAD_CASES)
def test_schema_violations_name_file_and_field(
    tmp_path: Path, cell: int | None, key: str, value: Any, field: str
) -> None:
    path = _write(tmp_path, _mutate(cell, key, value))
    with pytest.raises(ConfigError) as info:
        load_table("legate2023", "9", root=tmp_path)
    msg = str(info.value)
    assert str(path) in msg and field in msg
    assert isinstance(info.value, BenchmarkError)


def test_duplicate_ids_and_readings_rules(tmp_path: Path) -> None:
    d = _doc()
    d["cells"][1]["id"] = "a/acc"
    _write(tmp_path, d)
    with pytest.raises(ConfigError, match="duplicate id"):
        load_table("legate2023", 9, root=tmp_path)
    d = _doc()
    d["cells"][0]["readings"] = [
        {"source": "legate2023/table9", "paper": "legate2023", "printed": "67.8±0.6", "value": 67.8},
        {"source": "legate2023ws/table1", "paper": "legate2023ws", "printed": "66.0", "value": 66.0},
    ]
    d["cells"][0]["used"] = "legate2023/table9"
    _write(tmp_path, d)
    with pytest.raises(ConfigError, match="note"):
        load_table("legate2023", 9, root=tmp_path)
    d["cells"][0]["note"] = "two versions disagree"
    _write(tmp_path, d)
    assert len(load_table("legate2023", 9, root=tmp_path).cell("a/acc").readings) == 2
    d["cells"][0]["used"] = "legate2023ws/table1"  # the used reading must be what the cell prints
    _write(tmp_path, d)
    with pytest.raises(ConfigError, match="used"):
        load_table("legate2023", 9, root=tmp_path)


def test_bad_yaml_and_unknown_names(tmp_path: Path) -> None:
    path = _write(tmp_path, "source: [unclosed\n")
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        load_table("legate2023", 9, root=tmp_path)
    with pytest.raises(UnknownNameError, match="unknown paper"):
        load_table("legate2024", 2)
    with pytest.raises(UnknownNameError, match="tables of fedcof"):
        load_table("fedcof", 42)
    assert load_table("bernier2024", "3.1").table == load_table("bernier2024", "table3_1").table == "3_1"


def test_printed_parsers() -> None:
    assert parse_printed_accuracy("67.8±0.6") == (67.8, 0.6)
    assert parse_printed_accuracy("34.2") == (34.2, None)
    assert parse_printed_number("4.5×10^8").value == 4.5e8
    assert parse_printed_number("4.10×10^-3").decimals == 2
    assert parse_printed_number("57k").value == 57000
    assert parse_printed_number("731,668").value == 731668
    assert parse_printed_number("22050.").decimals == 0
    with pytest.raises(ConfigError):
        parse_printed_number("4..10×10^-3")
    with pytest.raises(ConfigError):
        parse_printed_accuracy("67.8 pm 0.6")


# ------------------------------------------------------------------------------------------------ verdict
def _cell(**kw: Any) -> ReportedCell:
    base: dict[str, Any] = dict(
        paper="legate2023", table="2", id="x", row=("r",), column=("c",), metric="accuracy", unit="percent",
        printed="85.4±0.4", mean=85.4, std=0.4, n_seeds=3, std_over="seeds", protocol={},
    )  # fmt: skip
    base.update(kw)
    return ReportedCell(**base)


def test_ours_stats_ddof1_and_single_seed() -> None:
    assert ours_stats([3.0]) == (3.0, 0.0, 1)
    mean, std, n = ours_stats([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3) and std == pytest.approx(1.0)
    for bad in ([], [float("nan")], [1.0, float("inf")]):
        with pytest.raises(ConfigError):
            ours_stats(bad)


def test_accuracy_pass_uses_combined_sigma() -> None:
    v = judge(_cell(), [85.0, 85.4, 85.8], substitute=False, not_run_reason=None)
    assert v.status is Status.PASS and v.passed
    assert v.ours_std == pytest.approx(0.4)
    assert v.tolerance == pytest.approx(2 * math.sqrt(0.4**2 + 0.4**2))
    assert v.paper_std_used == 0.4 and v.rule == "accuracy"


def test_accuracy_fail_and_one_point_floor() -> None:
    v = judge(_cell(), [86.6, 86.6, 86.6], substitute=False, not_run_reason=None)
    assert v.status is Status.FAIL and not v.passed
    assert v.tolerance == ACCURACY_FLOOR and v.delta == pytest.approx(1.2)
    assert (
        judge(_cell(), [86.4], substitute=False, not_run_reason=None).status is Status.PASS
    )  # |delta| = 1.0
    assert judge(_cell(), [84.3], substitute=False, not_run_reason=None).status is Status.FAIL


def test_accuracy_large_sigma_widens_the_tolerance() -> None:
    cell = _cell(printed="89.4±2.0", mean=89.4, std=2.0)
    v = judge(cell, [92.4, 94.4], substitute=False, not_run_reason=None)  # mean 93.4, std sqrt(2)
    assert v.tolerance == pytest.approx(2 * math.sqrt(4 + 2)) and v.status is Status.PASS
    assert judge(cell, [93.4, 95.4], substitute=False, not_run_reason=None).status is Status.FAIL


def test_client_std_is_not_a_seed_uncertainty() -> None:
    cell = _cell(
        paper="fedbabu", printed="46.93±5.47", mean=46.93, std=5.47, n_seeds=None, std_over="clients"
    )
    v = judge(cell, [48.5], substitute=False, not_run_reason=None)
    assert v.paper_std_used == 0.0 and v.tolerance == 1.0 and v.status is Status.FAIL
    assert judge(cell, [47.5], substitute=False, not_run_reason=None).status is Status.PASS


def test_substitute_weights_use_the_flat_three_points() -> None:
    cell = _cell(printed="64.5±3.0", mean=64.5, std=3.0)
    assert judge(cell, [67.4], substitute=True, not_run_reason=None).status is Status.SUBSTITUTE_PASS
    far = judge(cell, [67.6], substitute=True, not_run_reason=None)
    assert far.status is Status.SUBSTITUTE_FAIL and not far.passed and far.tolerance == SUBSTITUTE_TOLERANCE
    # the same value passes with the paper's own weights, because sigma_paper = 3.0 widens that tolerance
    assert judge(cell, [67.6], substitute=False, not_run_reason=None).status is Status.PASS
    # and a narrow paper std does not tighten the substitute rule below 3 points
    assert judge(_cell(), [87.9], substitute=True, not_run_reason=None).status is Status.SUBSTITUTE_PASS


@pytest.mark.parametrize(
    ("metric", "unit", "printed", "ours", "expect", "ours_printed"),
    [
        ("comm_gb", "GB", "1803.71", 1803.714, Status.PASS, "1803.71"),
        ("comm_gb", "GB", "1803.71", 1803.716, Status.FAIL, "1803.72"),
        ("compute_f", "F", "4.5×10^8", 4.549e8, Status.PASS, "4.5×10^8"),
        ("compute_f", "F", "4.5×10^8", 4.55e8, Status.FAIL, "4.6×10^8"),
        ("comm_gb", "GB", "4.1×10^-3", 0.00405, Status.PASS, "4.1×10^-3"),
        ("comm_gb", "GB", "4.1×10^-3", 0.00404, Status.FAIL, "4.0×10^-3"),
        ("comm_mb", "MB", "57k", 57400.0, Status.PASS, "57k"),
        ("comm_mb", "MB", "57k", 58000.0, Status.FAIL, "58k"),
        ("comm_mb", "MB", "57k", 56499.0, Status.FAIL, "56k"),
        ("num_images", "count", "50,000", 50000.0, Status.PASS, "50000"),
        ("num_images", "count", "50,000", 50001.0, Status.FAIL, "50001"),
        ("compute_f", "F", "1", 1.0, Status.PASS, "1"),
        ("rounds", "rounds", "2621", 2620.0, Status.FAIL, "2620"),
    ],
)
def test_cost_cells_equal_at_printed_precision(
    metric: str, unit: str, printed: str, ours: float, expect: Status, ours_printed: str
) -> None:
    cell = _cell(metric=metric, unit=unit, printed=printed, mean=parse_printed_number(printed).value, std=None,
                 n_seeds=None, std_over="unknown")  # fmt: skip
    v = judge(cell, [ours], substitute=False, not_run_reason=None)
    assert v.status is expect and v.ours_printed == ours_printed and v.rule == "exact-at-printed-precision"
    sub = judge(cell, [ours], substitute=True, not_run_reason=None)
    assert sub.status is (Status.SUBSTITUTE_PASS if expect is Status.PASS else Status.SUBSTITUTE_FAIL)


@pytest.mark.parametrize(
    ("printed", "ours", "expect"),
    [
        ("57k", 57400.0, Status.PASS),  # rounds to 57k
        ("57k", 57500.0, Status.PASS_DEPARTURE),  # rounds to 58k, cut gives 57k: printed_truncated
        ("538k", 538930.0, Status.PASS_DEPARTURE),  # fedcof Table 7 CIFAR-100, both directions
        ("271k", 270735.0, Status.PASS),  # fedcof Table 7 ImageNet-R: rounded (cut would give 270k)
        ("128k", 128940.0, Status.PASS_DEPARTURE),  # fedcof Table 3 iNat oracle ViT
        ("57k", 58000.0, Status.FAIL),
        ("57.5", 57.59, Status.FAIL),  # only printed thousands may be cut
    ],
)
def test_one_rule_for_printed_thousands(printed: str, ours: float, expect: Status) -> None:
    """A ``k`` value agrees when ours rounded or cut to the printed thousands gives it; the cut reading is
    the named departure ``printed_truncated`` (PASS*), the rounded one is a plain PASS."""
    cell = _cell(metric="comm_mb", unit="MB", printed=printed, mean=parse_printed_number(printed).value, std=None,
                 n_seeds=None, std_over="unknown")  # fmt: skip
    v = judge(cell, [ours], substitute=False, not_run_reason=None)
    assert v.status is expect
    assert (v.status is Status.PASS_DEPARTURE) == ("printed_truncated" in (v.reason or ""))


def test_a_match_under_a_departure_is_pass_star() -> None:
    cell = _cell(
        metric="compute_f", unit="F", printed="1", mean=1.0, std=None, n_seeds=None, std_over="unknown"
    )
    v = judge(cell, [1.0], substitute=False, not_run_reason=None, departures=["compute_unit_dataset_pass"])
    assert v.status is Status.PASS_DEPARTURE and v.passed and v.departed
    assert "compute_unit_dataset_pass (FedNCM compute printed as 1" in str(v.reason)
    sub = judge(cell, [1.0], substitute=True, not_run_reason=None, departures=["compute_unit_dataset_pass"])
    assert sub.status is Status.SUBSTITUTE_PASS_DEPARTURE
    off = judge(cell, [2.0], substitute=False, not_run_reason=None, departures=["compute_unit_dataset_pass"])
    assert off.status is Status.FAIL and off.reason is None
    assert judge(cell, [1.0], substitute=False, not_run_reason=None).status is Status.PASS


@pytest.mark.parametrize(
    ("ours", "expect"),
    [(22050.94, Status.PASS), (22049.96, Status.PASS), (22050.96, Status.FAIL), (22049.94, Status.FAIL)],
)
def test_truncated_cost_cell(ours: float, expect: Status) -> None:
    cell = _cell(metric="comm_mb", unit="MB", printed="22050.", mean=22050.0, std=None, n_seeds=None,
                 std_over="unknown", truncated=True, column_decimals=1)  # fmt: skip
    assert judge(cell, [ours], substitute=False, not_run_reason=None).status is expect
    assert round_like_printed(22050.94, "22050.", truncated=True, column_decimals=1) == "22050"


@pytest.mark.parametrize("substitute", [False, True])
def test_not_run_is_never_a_pass(substitute: bool) -> None:
    why = NotRunReason(ReasonKind.NEEDS_TRAINING, "extraction", "needs 30 GB of 224px CIFAR tensors")
    v = judge(_cell(), None, substitute=substitute, not_run_reason=why)
    assert v.status is Status.NOT_RUN and not v.passed and v.not_run == why
    assert v.reason == "needs 30 GB of 224px CIFAR tensors" and v.ours_mean is None and v.n_ours == 0
    illegible = _cell(mean=None, std=None, illegible=True, raw="4..10", printed="4..10")
    v = judge(illegible, [85.4], substitute=substitute, not_run_reason=None)
    assert v.status is Status.NOT_RUN and "illegible" in str(v.reason) and not v.passed
    assert v.not_run is not None and v.not_run.kind is ReasonKind.ILLEGIBLE


def test_judge_refuses_ambiguous_calls() -> None:
    with pytest.raises(ConfigError, match="both"):
        judge(_cell(), [85.4], substitute=False, not_run_reason=NotRunReason("needs training", "a GPU", "no GPU"))
    with pytest.raises(ConfigError, match="no ours_values"):
        judge(_cell(), None, substitute=False, not_run_reason=None)
    with pytest.raises(ConfigError, match="must be a NotRunReason"):  # a reason is typed, never bare text
        judge(_cell(), None, substitute=False, not_run_reason="no GPU")
    with pytest.raises(ConfigError):
        judge(_cell(), [], substitute=False, not_run_reason=None)


def test_status_strings_and_real_cells(tables: dict[str, Any]) -> None:
    assert [s.value for s in Status] == [
        "PASS", "FAIL", "SUBSTITUTE-PASS", "SUBSTITUTE-FAIL", "NOT RUN", "PASS*", "SUBSTITUTE-PASS*"
    ]  # fmt: skip
    ncm = tables["legate2023/table2"].cell("cifar10/fedncm/accuracy")
    assert judge(ncm, [64.8, 64.9, 64.7], substitute=False, not_run_reason=None).status is Status.PASS
    assert judge(ncm, [62.0, 62.1, 62.2], substitute=False, not_run_reason=None).status is Status.FAIL
    comm = tables["legate2023/table2"].cell("eurosat_sub/fedncm/comm_gb")  # used reading 4.10×10^-3
    assert judge(comm, [0.0041], substitute=False, not_run_reason=None).status is Status.PASS
    babu = tables["fedbabu/table1"].cell("f-1_0/tau-1/s-100-heterogeneity/initial")
    assert babu.printed == "46.93±5.47"
    assert judge(babu, [46.93 + 1.5], substitute=False, not_run_reason=None).status is Status.FAIL


@settings(max_examples=200, deadline=None)
@given(
    paper=st.floats(0, 100),
    paper_std=st.one_of(st.none(), st.floats(0, 10)),
    ours=st.lists(st.floats(0, 100), min_size=1, max_size=5),
    substitute=st.booleans(),
)
def test_accuracy_verdict_is_the_stated_inequality(
    paper: float, paper_std: float | None, ours: list[float], substitute: bool
) -> None:
    cell = _cell(
        printed="0", mean=paper, std=paper_std, std_over="seeds" if paper_std is not None else "unknown"
    )
    v = judge(cell, ours, substitute=substitute, not_run_reason=None)
    assert v.tolerance is not None and v.delta is not None
    assert v.tolerance >= (SUBSTITUTE_TOLERANCE if substitute else ACCURACY_FLOOR)
    assert v.passed == (abs(v.delta) <= v.tolerance + 1e-9)
    assert v.status.value.startswith("SUBSTITUTE-") == substitute
