"""Typed loader and schema validation for the reported paper tables under ``expected/``.

Every file ``expected/<paper>/table<N>.yaml`` holds one table of one paper, transcribed by hand, with
``kind: reported`` (the schema is documented once, in ``expected/README.md``). This module turns a file into
a :class:`ReportedTable` of :class:`ReportedCell` objects and rejects anything that does not follow the
schema with one :class:`~benchmark.errors.ConfigError` naming the file and the field.

The checks are deliberately strict: the printed string of every cell must parse to exactly the stored
``mean``/``std`` (so a value cannot be edited without editing what the paper printed), ids are unique, a
cell with several readings must say which one is used, and unknown keys are refused (typos do not pass
silently). Verdicts against our own numbers live in :mod:`benchmark.verdict`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.schema import YamlFile, read_yaml, valid_keys_hint

__all__ = [
    "EXPECTED_ROOT",
    "METRICS",
    "PAPERS",
    "PrintedNumber",
    "Reading",
    "ReportedCell",
    "ReportedTable",
    "Source",
    "cell_counts",
    "expected_root",
    "list_tables",
    "load_all",
    "load_table",
    "parse_printed_accuracy",
    "parse_printed_number",
    "truncated_thousands_agree",
]

#: Default location of the ``expected/`` folder (repository root).
EXPECTED_ROOT = Path(__file__).resolve().parents[1] / "expected"

#: Short paper ids, in the order of ``../shared/papers/README.md`` (found by
#: :func:`benchmark.papers.papers_dir`); one sub-folder each.
PAPERS: tuple[str, ...] = ("legate2023", "legate2023ws", "fedcof", "bernier2024", "fedbabu")

Comparison = Literal["statistical", "exact"]

#: metric -> (how it is compared, allowed units). ``statistical`` cells use the accuracy tolerance of
#: :mod:`benchmark.verdict`; ``exact`` cells (costs, counts, settings) must be equal at the printed precision.
METRICS: Mapping[str, tuple[Comparison, tuple[str, ...]]] = MappingProxyType(
    {
        "accuracy": ("statistical", ("percent",)),
        "compute_f": ("exact", ("F",)),
        "comm_gb": ("exact", ("GB",)),
        "comm_mb": ("exact", ("MB", "Mb")),
        "comm_tb": ("exact", ("TB", "Tb")),
        "rounds": ("exact", ("rounds",)),
        "num_classes": ("exact", ("count",)),
        "num_images": ("exact", ("count",)),
        "num_rows": ("exact", ("thousands",)),
    }
)

STD_OVER: tuple[str, ...] = ("seeds", "clients", "unknown")

_TOP_KEYS = {"source", "kind", "protocol", "notes", "cells", "qualitative", "missing", "same_as"}
_SOURCE_KEYS = {"document", "paper", "table", "caption"}
_CELL_REQUIRED = (
    "id", "row", "column", "metric", "unit", "printed", "mean", "std", "n_seeds", "std_over", "protocol",
)  # fmt: skip
_CELL_OPTIONAL = {
    "readings", "used", "note", "provenance", "truncated", "column_decimals", "illegible", "raw",
}  # fmt: skip
_READING_KEYS = {"source", "paper", "printed", "value", "std", "unit", "note"}

#: The keys a table's or a cell's ``protocol`` may hold: the settings the papers state, named as the
#: transcriptions under ``expected/`` name them and the runners (``benchmark/runners/``) and the cost model read
#: them. A key outside this vocabulary is an error naming its line and the closest key: a misspelled key
#: (``methdo``) would otherwise match no runner rule and leave the cell silently NOT RUN. A new setting is
#: added here, with the transcription that needs it.
PROTOCOL_KEYS: frozenset[str] = frozenset({
    # what is run: data, network, method
    "dataset", "split", "classes", "class_subset", "subset", "model", "model_readings", "pretrained", "method",
    "fl_algorithm", "setting", "training", "init", "classifier", "classifier_init", "head_init", "feature_dim",
    "image_size", "n_seeds",
    # federation
    "clients", "partition", "participation", "rounds", "stage1_rounds", "local_epochs", "local_steps",
    "centralized_epochs", "total_epochs", "train_per_client", "test_per_client", "test_distribution",
    "server_data_fraction", "server_update", "local_update_parts", "means_per_class_per_client",
    # optimisation
    "lr", "client_lr", "server_lr", "lr_schedule", "momentum", "batch_size", "head_lr_ratio", "fedprox_mu",
    "gamma", "lambda", "lora_rank", "num_z", "perturbation_scale", "priming_density",
    "priming_fraction_of_rounds", "seed_per_round",
    # evaluation after training
    "stage", "finetune_part", "finetune_epochs", "finetune_lr", "finetune_momentum", "finetune_rounds",
    # costs
    "comm_bits_per_param", "comm_bits_per_scalar", "comm_direction", "backward_cost_f",
})  # fmt: skip
#: Keys of a protocol's ``partition`` (``kind`` required), ``subset`` and each ``model_readings`` item.
PARTITION_KEYS: frozenset[str] = frozenset({"kind", "alpha", "beta", "shards_per_user", "users", "domains"})
SUBSET_KEYS: frozenset[str] = frozenset({"per_class", "total"})
MODEL_READING_KEYS: frozenset[str] = frozenset({"value", "source"})
_PROTOCOL_LISTING = "the cell-protocol keys of PROTOCOL_KEYS in benchmark/expected.py"

_ACC_RE = re.compile(r"^(-?\d+(?:\.\d+)?)(?:±(\d+(?:\.\d+)?))?$")
_NUM_RE = re.compile(r"^(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d*))?(?:×10\^(-?\d+))?(k)?$")
_FIX = "fix the file so that it follows the schema in expected/README.md"
_SAME = 1e-9  # relative tolerance for 'the printed string and the stored number agree'


@dataclass(frozen=True)
class PrintedNumber:
    """A number as printed in a paper: ``mantissa × 10**exponent`` with ``decimals`` printed decimals.

    ``"4.5×10^8"`` -> (4.5, 8, 1); ``"57k"`` -> (57, 3, 0); ``"50,000"`` -> (50000, 0, 0);
    ``"22050."`` (cut by the conversion) -> (22050, 0, 0). The one printed-number type of the suite: the
    verdict (:func:`benchmark.verdict.judge`) and the cost model (``benchmark/costs/``) read the strings of
    ``expected/`` through it, and :meth:`rounded` is the one rounding rule (half up at the printed
    precision).
    """

    mantissa: Decimal
    exponent: int
    decimals: int
    text: str = field(default="", compare=False)  # the string as ``expected/`` holds it

    @classmethod
    def parse(cls, text: str) -> PrintedNumber:
        """:func:`parse_printed_number`."""
        return parse_printed_number(text)

    @property
    def value(self) -> float:
        """The number the string denotes."""
        return float(self.mantissa.scaleb(self.exponent))

    @property
    def ulp(self) -> float:
        """One unit in the last printed place."""
        return 10.0 ** (self.exponent - self.decimals)

    @property
    def ascii(self) -> str:
        """The string with ``×10^`` written ``e`` (``4.5e8``), as the cost model's notes print it."""
        return self.text.replace("×10^", "e")

    def rounded(self, value: float) -> Decimal:
        """``value`` in units of ``10**exponent``, rounded half up to the printed decimals."""
        scaled = Decimal(repr(float(value))).scaleb(-self.exponent)
        return scaled.quantize(Decimal(1).scaleb(-self.decimals), rounding=ROUND_HALF_UP)

    def agrees(self, x: float) -> bool:
        """Whether ``x`` prints as this number (:meth:`rounded`, the verdict's rule)."""
        return self.rounded(x) == self.mantissa

    def interval(self, *, truncated: bool = False) -> tuple[float, float]:
        """Values that print as this number (rounded; cut, upper end excluded, when ``truncated``)."""
        if truncated:
            return self.value, self.value + self.ulp
        return self.value - self.ulp / 2, self.value + self.ulp / 2


def parse_printed_number(printed: str) -> PrintedNumber:
    """Parse a printed cost/count cell (plain, thousands separators, ``×10^e`` or a ``k`` suffix).

    Raises :class:`ConfigError` when the string is not such a number.
    """
    m = _NUM_RE.match(printed)
    if m is None:
        raise ConfigError(
            f"printed value {printed!r} is not a number", "write e.g. '1803.71', '4.5×10^8' or '57k'"
        )
    whole, frac, exp, kilo = m.groups()
    digits = whole.replace(",", "") + ("." + frac if frac else "")
    exponent = (int(exp) if exp else 0) + (3 if kilo else 0)
    return PrintedNumber(Decimal(digits), exponent, len(frac) if frac else 0, printed)


def truncated_thousands_agree(value: float, printed: str) -> bool:
    """The one rule for printed thousands (``'538k'``): True when ``printed`` ends in ``k`` and ``value``, cut
    (floored) to the printed precision, equals it.

    A ``k`` value agrees with ours when ours **rounded** (half up) or **cut** to the printed thousands gives
    it, because fedcof prints them both ways: Table 7's ``271k`` is 270,735 rounded (cut gives 270k), its
    ``538k`` is 538,930 cut and Table 3's ``128k`` is 128,940 cut (rounded gives 539k / 129k). Rounding is
    the reading of every printed number (:func:`benchmark.verdict.judge`); an agreement that needs the cut is
    the named departure ``printed_truncated`` (``benchmark/costs/conventions.py``), so such a cell is
    ``PASS*``, never ``PASS``. Used by the verdict and by the cost model (``benchmark/costs/paper_cells.py``);
    a cell whose decimals the text conversion cut (``truncated: true`` in ``expected/``) is another matter.
    """
    if not printed.strip().endswith("k"):
        return False
    p = parse_printed_number(printed.strip())
    scaled = Decimal(repr(float(value))).scaleb(-p.exponent)
    return scaled.quantize(Decimal(1).scaleb(-p.decimals), rounding=ROUND_DOWN) == p.mantissa


def parse_printed_accuracy(printed: str) -> tuple[float, float | None]:
    """Parse ``"67.8±0.6"`` -> (67.8, 0.6) or ``"34.2"`` -> (34.2, None); :class:`ConfigError` otherwise."""
    m = _ACC_RE.match(printed)
    if m is None:
        raise ConfigError(f"printed value {printed!r} is not 'mean' or 'mean±std'", "write e.g. '67.8±0.6'")
    return float(m.group(1)), (float(m.group(2)) if m.group(2) else None)


@dataclass(frozen=True)
class Source:
    """Where a table comes from: document file name, short paper id, table number and caption."""

    document: str
    paper: str
    table: str
    caption: str


@dataclass(frozen=True)
class Reading:
    """One of several readings of a cell (garbled conversion, or the two versions of a paper disagree)."""

    source: str
    paper: str
    printed: str
    value: float | None
    std: float | None = None
    unit: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class ReportedCell:
    """One numeric cell of a paper table, with the protocol needed to rerun it.

    ``protocol`` is the table-level protocol with the cell's own overrides applied. ``mean`` is ``None`` only
    for an ``illegible`` cell (its raw text is in ``raw``). ``truncated`` marks a value cut by the text
    conversion; ``column_decimals`` is then the precision the rest of its column prints.
    """

    paper: str
    table: str
    id: str
    row: tuple[str, ...]
    column: tuple[str, ...]
    metric: str
    unit: str
    printed: str
    mean: float | None
    std: float | None
    n_seeds: int | None
    std_over: str
    protocol: Mapping[str, Any]
    readings: tuple[Reading, ...] = ()
    used: str | None = None
    note: str | None = None
    provenance: str | None = None
    truncated: bool = False
    column_decimals: int | None = None
    illegible: bool = False
    raw: str | None = None

    @property
    def comparison(self) -> Comparison:
        """``statistical`` (accuracy) or ``exact`` (costs, counts, settings); see :data:`METRICS`."""
        return METRICS[self.metric][0]

    @property
    def key(self) -> str:
        """Globally unique name, ``<paper>/table<N>#<id>``."""
        return f"{self.paper}/table{self.table}#{self.id}"


@dataclass(frozen=True)
class ReportedTable:
    """A whole transcribed table (``kind: reported``)."""

    paper: str
    table: str
    path: Path
    source: Source
    kind: str
    protocol: Mapping[str, Any]
    notes: tuple[str, ...]
    cells: tuple[ReportedCell, ...]
    qualitative: tuple[Mapping[str, Any], ...] = ()
    missing: bool = False
    same_as: str | None = None

    @property
    def name(self) -> str:
        """``<paper>/table<N>``."""
        return f"{self.paper}/table{self.table}"

    def cell(self, cell_id: str) -> ReportedCell:
        """The cell with id ``cell_id``; :class:`UnknownNameError` otherwise."""
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise UnknownNameError(
            f"{self.name}: no cell {cell_id!r}", f"{len(self.cells)} cells; see {self.path}"
        )


# ------------------------------------------------------------------------------------------------- loading
def expected_root(root: str | Path | None = None) -> Path:
    """The ``expected/`` folder: the argument, else the repository's own."""
    return Path(root) if root is not None else EXPECTED_ROOT


def _table_key(table: str) -> tuple[tuple[int, int | str], ...]:
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in table.split("_"))


def _norm_table(table: str | int) -> str:
    t = str(table).strip()
    t = t.removeprefix("table").removesuffix(".yaml")
    return t.replace(".", "_")


def list_tables(root: str | Path | None = None) -> list[tuple[str, str]]:
    """All reported tables as ``(paper, table)`` pairs, papers in :data:`PAPERS` order, tables in natural order.

    ``pinned/`` (this suite's own outputs) is not listed: it holds a different kind of value.
    """
    base = expected_root(root)
    out: list[tuple[str, str]] = []
    for paper in PAPERS:
        folder = base / paper
        if not folder.is_dir():
            continue
        tables = [p.stem.removeprefix("table") for p in folder.glob("table*.yaml")]
        out.extend((paper, t) for t in sorted(tables, key=_table_key))
    return out


def load_table(paper: str, table: str | int, root: str | Path | None = None) -> ReportedTable:
    """Load and validate ``expected/<paper>/table<table>.yaml``.

    ``table`` may be ``2``, ``"2"``, ``"table2"``, ``"3.1"`` or ``"3_1"``. A paper or table that does not exist
    raises :class:`UnknownNameError` listing the valid ones; a schema violation raises :class:`ConfigError`
    naming the file and field.
    """
    if paper not in PAPERS:
        raise UnknownNameError(f"unknown paper {paper!r}", f"use one of: {', '.join(PAPERS)}")
    t = _norm_table(table)
    path = expected_root(root) / paper / f"table{t}.yaml"
    if not path.is_file():
        known = [tb for p, tb in list_tables(root) if p == paper]
        raise UnknownNameError(
            f"no expected table {paper}/table{t} ({path} does not exist)",
            f"tables of {paper}: {', '.join(known) or 'none'}",
        )
    stat = path.stat()
    return _load_cached(str(path.resolve()), stat.st_mtime_ns, stat.st_size, paper, t)


def load_all(root: str | Path | None = None) -> list[ReportedTable]:
    """Every table of :func:`list_tables`, loaded and validated."""
    return [load_table(p, t, root) for p, t in list_tables(root)]


def cell_counts(root: str | Path | None = None) -> dict[str, int]:
    """Number of numeric cells per table, keyed ``<paper>/table<N>`` (a qualitative or missing table has 0)."""
    return {tb.name: len(tb.cells) for tb in load_all(root)}


@functools.lru_cache(maxsize=256)
def _load_cached(path: str, _mtime: int, _size: int, paper: str, table: str) -> ReportedTable:
    src = read_yaml(path)
    return _validate(src.data, src.path, paper, table, src)


# ---------------------------------------------------------------------------------------------- validation
class _Ctx:
    def __init__(self, path: Path, src: YamlFile | None = None) -> None:
        self.path = path
        self.src = src

    def at(self, keys: Sequence[str | int] | None) -> str:
        """``<file>:<line>`` of ``keys`` (the file alone without them)."""
        if keys is None or self.src is None:
            return str(self.path) if self.src is None else self.src.name
        return self.src.at(keys)

    def fail(self, where: str, problem: str, fix: str = _FIX, keys: Sequence[str | int] | None = None) -> ConfigError:
        return ConfigError(f"{self.at(keys)}: {where}: {problem}", fix)

    def unknown(
        self, keys: Sequence[str | int], key: Any, valid: Collection[str], where: str, listing: str | None = None
    ) -> ConfigError:
        """The one error for an unknown key: file and line, where, the closest valid key."""
        return ConfigError(
            f"{self.at((*keys, key))}: unknown key {key!r} in {where}", valid_keys_hint(key, valid, listing)
        )

    def check_keys(
        self, data: Mapping[str, Any], keys: Sequence[str | int], where: str, valid: Collection[str],
        listing: str | None = None,
    ) -> None:  # fmt: skip
        """Every key of ``data`` (at ``keys``) is a string in ``valid``; the first that is not is one error."""
        for key in data:
            if not isinstance(key, str) or key not in valid:
                raise self.unknown(keys, key, valid, where, listing)

    def mapping(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected a mapping, got {type(value).__name__}")
        return value

    def text(self, value: Any, where: str, *, optional: bool = False) -> str | None:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value.strip():
            raise self.fail(where, f"expected a non-empty string, got {value!r}")
        return value

    def number(self, value: Any, where: str, *, optional: bool = False) -> float | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise self.fail(where, f"expected a finite number, got {value!r}")
        return float(value)

    def keys(
        self, data: Mapping[str, Any], where: str, required: Sequence[str], optional: set[str],
        keys: Sequence[str | int] = (),
    ) -> None:  # fmt: skip
        self.check_keys(data, keys, where, {*required, *optional})
        missing = [k for k in required if k not in data]
        if missing:
            raise self.fail(where, f"missing field(s) {', '.join(missing)}", keys=keys)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _validate(data: Any, path: Path, paper: str, table: str, src: YamlFile | None = None) -> ReportedTable:
    ctx = _Ctx(path, src)
    top = ctx.mapping(data, "top level")
    ctx.keys(top, "top level", ("source", "kind", "protocol", "cells"), _TOP_KEYS - {"source", "kind"})
    if top["kind"] != "reported":
        raise ctx.fail(
            "kind", f"expected 'reported', got {top['kind']!r}", "pinned values live under expected/pinned/"
        )
    src = ctx.mapping(top["source"], "source")
    ctx.keys(src, "source", tuple(sorted(_SOURCE_KEYS)), set(), keys=("source",))
    source = Source(
        *(str(ctx.text(src[k], f"source.{k}")) for k in ("document", "paper", "table", "caption"))
    )
    if source.paper != paper:
        raise ctx.fail("source.paper", f"{source.paper!r} but the file is under expected/{paper}/")
    if _norm_table(source.table) != table:
        raise ctx.fail("source.table", f"{source.table!r} but the file is table{table}.yaml")
    protocol = ctx.mapping(top["protocol"] if top["protocol"] is not None else {}, "protocol")
    _check_protocol(ctx, protocol, "protocol", ("protocol",))
    notes = top.get("notes") or []
    if not isinstance(notes, list) or not all(isinstance(n, str) and n.strip() for n in notes):
        raise ctx.fail("notes", "expected a list of non-empty strings")
    missing = top.get("missing", False)
    if not isinstance(missing, bool):
        raise ctx.fail("missing", f"expected true/false, got {missing!r}")
    same_as = ctx.text(top.get("same_as"), "same_as", optional=True)
    if same_as is not None and not re.fullmatch(r"[a-z0-9]+/table[0-9A-Za-z_]+", same_as):
        raise ctx.fail("same_as", f"expected '<paper>/table<N>', got {same_as!r}")
    qual = top.get("qualitative") or []
    if not isinstance(qual, list) or not all(isinstance(q, Mapping) for q in qual):
        raise ctx.fail("qualitative", "expected a list of mappings")
    raw_cells = top["cells"]
    if not isinstance(raw_cells, list):
        raise ctx.fail("cells", f"expected a list, got {type(raw_cells).__name__}")
    if missing and raw_cells:
        raise ctx.fail("cells", "a table marked 'missing: true' must have no cells")
    if not raw_cells and not (missing or qual):
        raise ctx.fail("cells", "empty; mark the table 'missing: true' or give its 'qualitative' rows")
    cells: list[ReportedCell] = []
    seen: set[str] = set()
    for i, rc in enumerate(raw_cells):
        cell = _validate_cell(ctx, rc, i, protocol, paper, table)
        if cell.id in seen:
            raise ctx.fail(f"cells[{i}].id", f"duplicate id {cell.id!r}")
        seen.add(cell.id)
        cells.append(cell)
    return ReportedTable(
        paper=paper,
        table=table,
        path=path,
        source=source,
        kind="reported",
        protocol=_freeze(dict(protocol)),
        notes=tuple(notes),
        cells=tuple(cells),
        qualitative=tuple(_freeze(dict(q)) for q in qual),
        missing=missing,
        same_as=same_as,
    )


def _check_protocol(ctx: _Ctx, protocol: Mapping[str, Any], where: str, keys: tuple[str | int, ...]) -> None:
    """A table's or cell's protocol (at ``keys`` in the file): its keys, and those of its ``partition``,
    ``subset`` and ``model_readings``, are known (:data:`PROTOCOL_KEYS`); a partition states its ``kind``."""
    ctx.check_keys(protocol, keys, where, PROTOCOL_KEYS, _PROTOCOL_LISTING)
    part = protocol.get("partition")
    if part is not None:
        part = ctx.mapping(part, f"{where}.partition")
        ctx.check_keys(part, (*keys, "partition"), f"{where}.partition", PARTITION_KEYS)
        if "kind" not in part:
            raise ctx.fail(
                f"{where}.partition", "missing field 'kind' (dirichlet, shards, natural, ...)", keys=(*keys, "partition")
            )
    subset = protocol.get("subset")
    if subset is not None:
        ctx.check_keys(ctx.mapping(subset, f"{where}.subset"), (*keys, "subset"), f"{where}.subset", SUBSET_KEYS)
    readings = protocol.get("model_readings")
    if readings is not None:
        if not isinstance(readings, list):
            raise ctx.fail(f"{where}.model_readings", "expected a list of {value, source} mappings", keys=keys)
        for j, r in enumerate(readings):
            w = f"{where}.model_readings[{j}]"
            ctx.check_keys(ctx.mapping(r, w), (*keys, "model_readings", j), w, MODEL_READING_KEYS)


def _validate_cell(
    ctx: _Ctx, rc: Any, i: int, table_protocol: Mapping[str, Any], paper: str, table: str
) -> ReportedCell:
    where = f"cells[{i}]"
    c = ctx.mapping(rc, where)
    if isinstance(c.get("id"), str):
        where = f"cells[{i}] ({c['id'] if c['id'].isprintable() else repr(c['id'])})"
    ctx.keys(c, where, _CELL_REQUIRED, _CELL_OPTIONAL, keys=("cells", i))
    cid = str(ctx.text(c["id"], f"{where}.id"))
    row, column = c["row"], c["column"]
    for name, labels in (("row", row), ("column", column)):
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise ctx.fail(f"{where}.{name}", "expected a list of label strings (as printed)")
    metric = c["metric"]
    if metric not in METRICS:
        raise ctx.fail(f"{where}.metric", f"unknown metric {metric!r}", f"use one of: {', '.join(METRICS)}")
    comparison, units = METRICS[metric]
    if c["unit"] not in units:
        raise ctx.fail(f"{where}.unit", f"{c['unit']!r} is not a unit of {metric} ({', '.join(units)})")
    printed = ctx.text(c["printed"], f"{where}.printed")
    assert printed is not None
    illegible = c.get("illegible", False)
    if not isinstance(illegible, bool):
        raise ctx.fail(f"{where}.illegible", f"expected true/false, got {illegible!r}")
    mean = ctx.number(c["mean"], f"{where}.mean", optional=illegible)
    std = ctx.number(c["std"], f"{where}.std", optional=True)
    if std is not None and std < 0:
        raise ctx.fail(f"{where}.std", f"negative ({std})")
    if illegible:
        if mean is not None:
            raise ctx.fail(f"{where}.mean", "an illegible cell has mean: null")
        ctx.text(c.get("raw"), f"{where}.raw")
    else:
        _check_printed(ctx, where, comparison, printed, mean, std)
    n_seeds = c["n_seeds"]
    if n_seeds is not None and (isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 1):
        raise ctx.fail(f"{where}.n_seeds", f"expected null or a positive integer, got {n_seeds!r}")
    std_over = c["std_over"]
    if std_over not in STD_OVER:
        raise ctx.fail(f"{where}.std_over", f"{std_over!r} is not one of {', '.join(STD_OVER)}")
    if std is None and std_over != "unknown":
        raise ctx.fail(f"{where}.std_over", f"{std_over!r} but the cell has no std (use 'unknown')")
    cell_proto = ctx.mapping(c["protocol"] if c["protocol"] is not None else {}, f"{where}.protocol")
    _check_protocol(ctx, cell_proto, f"{where}.protocol", ("cells", i, "protocol"))
    readings, used = _validate_readings(ctx, c, where, printed, ("cells", i))
    truncated = c.get("truncated", False)
    if not isinstance(truncated, bool):
        raise ctx.fail(f"{where}.truncated", f"expected true/false, got {truncated!r}")
    col_dec = c.get("column_decimals")
    if truncated and (isinstance(col_dec, bool) or not isinstance(col_dec, int) or col_dec < 0):
        raise ctx.fail(
            f"{where}.column_decimals", "a truncated cell needs the column's printed decimals (int >= 0)"
        )
    if truncated and comparison != "exact":
        raise ctx.fail(f"{where}.truncated", "only cost/count cells can be marked truncated")
    return ReportedCell(
        paper=paper,
        table=table,
        id=cid,
        row=tuple(row),
        column=tuple(column),
        metric=metric,
        unit=c["unit"],
        printed=printed,
        mean=mean,
        std=std,
        n_seeds=n_seeds,
        std_over=std_over,
        protocol=_freeze({**table_protocol, **cell_proto}),
        readings=readings,
        used=used,
        note=ctx.text(c.get("note"), f"{where}.note", optional=True),
        provenance=ctx.text(c.get("provenance"), f"{where}.provenance", optional=True),
        truncated=truncated,
        column_decimals=col_dec if truncated else None,
        illegible=illegible,
        raw=c.get("raw"),
    )


def _check_printed(
    ctx: _Ctx, where: str, comparison: Comparison, printed: str, mean: float | None, std: float | None
) -> None:
    try:
        if comparison == "statistical":
            pm, ps = parse_printed_accuracy(printed)
        else:
            pm, ps = parse_printed_number(printed).value, None
    except ConfigError as exc:
        raise ctx.fail(f"{where}.printed", exc.what, exc.fix) from None
    assert mean is not None
    if not math.isclose(pm, mean, rel_tol=_SAME, abs_tol=0.0):
        raise ctx.fail(
            f"{where}.mean", f"{mean!r} but printed says {printed!r}", "the printed string is the truth"
        )
    if (ps is None) != (std is None) or (ps is not None and std is not None and not math.isclose(ps, std)):
        raise ctx.fail(
            f"{where}.std", f"{std!r} but printed says {printed!r}", "the printed string is the truth"
        )


def _validate_readings(
    ctx: _Ctx, c: Mapping[str, Any], where: str, printed: str, keys: tuple[str | int, ...] = ()
) -> tuple[tuple[Reading, ...], str | None]:
    raw = c.get("readings")
    used = c.get("used")
    if raw is None:
        if used is not None:
            raise ctx.fail(f"{where}.used", "given without 'readings'")
        return (), None
    if not isinstance(raw, list) or len(raw) < 2:
        raise ctx.fail(f"{where}.readings", "expected a list of at least two readings")
    if not isinstance(c.get("note"), str):
        raise ctx.fail(f"{where}.note", "a cell with several readings needs a note explaining the choice")
    out = []
    for j, r in enumerate(raw):
        w = f"{where}.readings[{j}]"
        r = ctx.mapping(r, w)
        ctx.keys(
            r,
            w,
            ("source", "paper", "printed", "value"),
            _READING_KEYS - {"source", "paper", "printed", "value"},
            keys=(*keys, "readings", j),
        )
        if r["paper"] not in PAPERS:
            raise ctx.fail(f"{w}.paper", f"unknown paper {r['paper']!r}", f"use one of: {', '.join(PAPERS)}")
        out.append(
            Reading(
                source=str(ctx.text(r["source"], f"{w}.source")),
                paper=r["paper"],
                printed=str(ctx.text(r["printed"], f"{w}.printed")),
                value=ctx.number(r["value"], f"{w}.value", optional=True),
                std=ctx.number(r.get("std"), f"{w}.std", optional=True),
                unit=ctx.text(r.get("unit"), f"{w}.unit", optional=True),
                note=ctx.text(r.get("note"), f"{w}.note", optional=True),
            )
        )
    sources = [r.source for r in out]
    if len(set(sources)) != len(sources):
        raise ctx.fail(f"{where}.readings", "two readings share the same source")
    if used not in sources:
        raise ctx.fail(
            f"{where}.used", f"{used!r} is not the source of one of the readings ({', '.join(sources)})"
        )
    chosen = out[sources.index(used)]
    if chosen.printed != printed:
        raise ctx.fail(
            f"{where}.used", f"the used reading prints {chosen.printed!r} but the cell prints {printed!r}"
        )
    return tuple(out), used
