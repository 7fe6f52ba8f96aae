"""Load and validate the claim catalogue ``claims/<paper>.yaml`` (format: claims/README.md).

Bad input gets one :class:`~benchmark.errors.ConfigError` naming the file, the claim id and the field. Keys
that name a cell absent from a *present* check report are a catalogue error too
(:func:`check_keys`); a key whose target has no report yet is evaluated as NOT RUN.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.claims.kinds import COMMON, CURVE, EITHER, KINDS, POINT
from benchmark.claims.model import Claim
from benchmark.claims.quotes import PAPER_FILES
from benchmark.claims.sources import CheckIndex
from benchmark.errors import ConfigError
from benchmark.schema import parse_yaml

FIELDS = {"id", "document", "line", "quote", "statement", "kind", "operands", "rule", "settings", "grid"}
SPEC_FORMS = ("cell", "value", "diff", "figure", "cells")
DIRECTIONS = ("non_increasing", "non_decreasing")


def _err(source: str, cid: str, field: str, problem: str, fix: str) -> ConfigError:
    return ConfigError(f"{source}: claim {cid!r}: field {field!r}: {problem}", fix)


def fill(spec: Any, setting: Mapping[str, str]) -> Any:
    """``spec`` with ``{name}`` template fields of strings replaced from ``setting`` (recursively)."""
    if isinstance(spec, str):
        return spec.format_map(setting)
    if isinstance(spec, list):
        return [fill(s, setting) for s in spec]
    if isinstance(spec, Mapping):
        return {k: fill(v, setting) for k, v in spec.items()}
    return spec


def spec_shape(spec: Any) -> str:
    """``point`` or ``curve`` for a validated operand spec."""
    if isinstance(spec, Mapping) and ("cells" in spec or ("figure" in spec and "x" not in spec)):
        return CURVE
    return POINT


def spec_keys(spec: Any) -> list[str]:
    """The check-cell keys an operand spec references."""
    if isinstance(spec, str):
        return [spec]
    if isinstance(spec, Mapping):
        if "cell" in spec:
            return [str(spec["cell"])]
        if "cells" in spec:
            return [str(k) for k in spec["cells"]]
        if "diff" in spec:
            return [k for part in spec["diff"] for k in spec_keys(part)]
    return []


def spec_figures(spec: Any) -> list[str]:
    if isinstance(spec, Mapping):
        if "figure" in spec:
            return [str(spec["figure"])]
        if "diff" in spec:
            return [f for part in spec["diff"] for f in spec_figures(part)]
    return []


def _check_spec(spec: Any, where: str, source: str, cid: str) -> None:
    fix = (
        "an operand is a cell key 'paper/table#cell', or one of {cell: KEY}, {value: X}, {diff: [A, B]}, "
        "{figure: NAME, series: S[, x: X]}, {cells: [KEYS], x: [XS]}"
    )
    if isinstance(spec, str):
        if "#" not in spec:
            raise _err(source, cid, where, f"{spec!r} is not a check-cell key (paper/table#cell)", fix)
        return
    if not isinstance(spec, Mapping):
        raise _err(source, cid, where, f"{spec!r} is not an operand", fix)
    forms = [f for f in SPEC_FORMS if f in spec]
    if len(forms) != 1:
        raise _err(
            source, cid, where, f"needs exactly one of {', '.join(SPEC_FORMS)}, got {sorted(spec)}", fix
        )
    form = forms[0]
    allowed = {
        "cell": {"cell"},
        "value": {"value"},
        "diff": {"diff"},
        "figure": {"figure", "series", "x", "where"},
        "cells": {"cells", "x"},
    }[form]
    if set(spec) - allowed:
        raise _err(
            source, cid, where, f"unknown field(s) {sorted(set(spec) - allowed)} in a {form} operand", fix
        )
    if form == "value":
        try:
            float(spec["value"])
        except (TypeError, ValueError):
            raise _err(source, cid, where, f"value {spec['value']!r} is not a number", fix) from None
    elif form == "cell":
        _check_spec(str(spec["cell"]), where, source, cid)
    elif form == "diff":
        parts = spec["diff"]
        if not isinstance(parts, list) or len(parts) != 2:
            raise _err(source, cid, where, "diff needs a list of two operands", fix)
        for i, part in enumerate(parts):
            _check_spec(part, f"{where}.diff[{i}]", source, cid)
            if spec_shape(part) != POINT:
                raise _err(source, cid, where, "diff takes point operands, not curves", fix)
    elif form == "figure":
        if "series" not in spec:
            raise _err(source, cid, where, "a figure operand needs series", fix)
    elif form == "cells":
        keys, xs = spec.get("cells"), spec.get("x")
        if not isinstance(keys, list) or not isinstance(xs, list) or len(keys) != len(xs) or len(keys) < 2:
            raise _err(source, cid, where, "cells and x must be lists of the same length (>= 2)", fix)
        for i, k in enumerate(keys):
            _check_spec(k, f"{where}.cells[{i}]", source, cid)


def _settings(entry: Mapping[str, Any], source: str, cid: str) -> tuple[dict[str, str], ...]:
    fix = "settings: a list of strings (template field {setting}) or of mappings; grid: {name: [values]}"
    if "settings" in entry and "grid" in entry:
        raise _err(source, cid, "settings", "give settings or grid, not both", fix)
    if "grid" in entry:
        grid = entry["grid"]
        if (
            not isinstance(grid, Mapping)
            or not grid
            or not all(isinstance(v, list) and v for v in grid.values())
        ):
            raise _err(source, cid, "grid", "must map names to non-empty lists", fix)
        names = list(grid)
        return tuple(
            {n: str(v) for n, v in zip(names, combo, strict=True)}
            for combo in itertools.product(*(grid[n] for n in names))
        )
    raw = entry.get("settings")
    if raw is None:
        return ({},)
    if not isinstance(raw, list) or not raw:
        raise _err(source, cid, "settings", "must be a non-empty list", fix)
    out = []
    for s in raw:
        if isinstance(s, Mapping):
            out.append({str(k): str(v) for k, v in s.items()})
        elif isinstance(s, str | int | float):
            out.append({"setting": str(s)})
        else:
            raise _err(source, cid, "settings", f"{s!r} is neither a string nor a mapping", fix)
    return tuple(out)


def setting_label(setting: Mapping[str, str]) -> str:
    return "/".join(setting.values()) if setting else "-"


def _claim(entry: Any, paper: str, default_doc: str, source: str, seen: dict[str, str]) -> Claim:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{source}: a claim entry is not a mapping: {entry!r}", "see claims/README.md")
    cid = str(entry.get("id") or "")
    if not cid:
        raise ConfigError(
            f"{source}: a claim has no id (quote: {str(entry.get('quote'))[:40]!r})",
            "give every claim a unique id",
        )
    if cid in seen:
        raise _err(
            source, cid, "id", f"duplicate (also in {seen[cid]})", "ids are unique across the catalogue"
        )
    seen[cid] = source
    unknown = set(entry) - FIELDS
    if unknown:
        raise _err(source, cid, sorted(unknown)[0], "unknown field", f"fields: {', '.join(sorted(FIELDS))}")
    document = str(entry.get("document", default_doc))
    if document not in PAPER_FILES:
        raise _err(
            source, cid, "document", f"unknown document {document!r}", f"one of {', '.join(PAPER_FILES)}"
        )
    line = entry.get("line")
    if not isinstance(line, int) or isinstance(line, bool) or line < 1:
        raise _err(source, cid, "line", f"{line!r} is not a 1-based line number", "the line of the quote")
    for field in ("quote", "statement"):
        if not isinstance(entry.get(field), str) or not entry[field].strip():
            raise _err(
                source,
                cid,
                field,
                "missing or empty",
                "quote: the paper's exact words; statement: our operational reading",
            )
    kind_name = entry.get("kind")
    if kind_name not in KINDS:
        raise _err(source, cid, "kind", f"unknown kind {kind_name!r}", f"one of {', '.join(sorted(KINDS))}")
    kind = KINDS[kind_name]
    operands = entry.get("operands")
    if not isinstance(operands, Mapping):
        raise _err(
            source,
            cid,
            "operands",
            "missing (a mapping of operand name -> spec)",
            f"{kind.name} takes {', '.join(kind.operands)}",
        )
    if set(operands) != set(kind.operands):
        raise _err(
            source,
            cid,
            "operands",
            f"has {sorted(operands)}, {kind.name} takes {sorted(kind.operands)}",
            "name the operands as the kind does (claims/README.md)",
        )
    rule_in = entry.get("rule") or {}
    if not isinstance(rule_in, Mapping):
        raise _err(source, cid, "rule", "must be a mapping", "rule: {param: value}")
    known = set(kind.defaults) | set(COMMON) | set(kind.required)
    for p in rule_in:
        if p not in known:
            raise _err(
                source,
                cid,
                f"rule.{p}",
                f"unknown parameter for {kind.name}",
                f"parameters: {', '.join(sorted(known))}",
            )
    for p in kind.required:
        if p not in rule_in:
            raise _err(source, cid, f"rule.{p}", f"required by {kind.name}", "see claims/README.md")
    rule = {**COMMON, **kind.defaults, **rule_in}
    settings = _settings(entry, source, cid)
    for setting in settings:
        try:
            filled_ops, filled_rule = fill(dict(operands), setting), fill(dict(rule), setting)
        except (KeyError, IndexError, ValueError) as err:
            raise _err(
                source,
                cid,
                "operands",
                f"template field {err} not in setting {dict(setting)}",
                "every {name} in an operand must be a settings/grid field",
            ) from None
        for name, spec in filled_ops.items():
            _check_spec(spec, f"operands.{name}", source, cid)
            want, got = kind.operands[name], spec_shape(spec)
            if want != EITHER and want != got:
                raise _err(
                    source,
                    cid,
                    f"operands.{name}",
                    f"{kind.name} needs a {want}, got a {got}",
                    "a curve is {figure, series} without x or {cells, x}; a point anything else",
                )
        if kind.operands.keys() == {"a", "b"} and kind.operands["a"] == EITHER:
            if spec_shape(filled_ops["a"]) != spec_shape(filled_ops["b"]):
                raise _err(source, cid, "operands", "a and b must both be points or both curves", "")
        for p, v in filled_rule.items():
            if p == "direction":
                if v not in DIRECTIONS:
                    raise _err(source, cid, "rule.direction", f"{v!r}", f"one of {', '.join(DIRECTIONS)}")
            elif p == "strict":
                if not isinstance(v, bool):
                    raise _err(source, cid, "rule.strict", f"{v!r} is not true/false", "")
            elif v is not None:
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise _err(source, cid, f"rule.{p}", f"{v!r} is not a number", "") from None
        if not 0.0 < float(filled_rule["fraction"]) <= 1.0:
            raise _err(source, cid, "rule.fraction", "must be in (0, 1]", "")
        if (
            kind.name in ("ratio", "bound")
            and filled_rule.get("min") is None
            and filled_rule.get("max") is None
        ):
            raise _err(source, cid, "rule", f"{kind.name} needs min or max", "")
    return Claim(
        cid,
        paper,
        document,
        line,
        entry["quote"],
        entry["statement"],
        kind.name,
        dict(operands),
        rule,
        settings,
        source,
    )


def load_file(path: str | Path, seen: dict[str, str] | None = None) -> list[Claim]:
    """The claims of one catalogue file (``paper:``, optional ``document:``, ``claims: [...]``)."""
    path = Path(path)
    source = str(path)
    doc = parse_yaml(path.read_text(), source)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("claims"), list):
        raise ConfigError(f"{source}: no 'claims:' list", "a catalogue file is {paper: ID, claims: [...]}")
    paper = str(doc.get("paper") or path.stem)
    default_doc = str(doc.get("document") or paper)
    seen = {} if seen is None else seen
    return [_claim(e, paper, default_doc, source, seen) for e in doc["claims"]]


def load_catalogue(folder: str | Path) -> dict[str, list[Claim]]:
    """paper -> claims, one ``*.yaml`` file per paper, ids unique across the catalogue."""
    folder = Path(folder)
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise ConfigError(f"{folder}: no claims/*.yaml", "pass --catalogue the claims/ folder")
    seen: dict[str, str] = {}
    out: dict[str, list[Claim]] = {}
    for path in files:
        claims = load_file(path, seen)
        if claims:
            out.setdefault(claims[0].paper, []).extend(claims)
    return out


def check_keys(claims: list[Claim], checks: CheckIndex) -> None:
    """Raise for a cell key absent from a check report that is present (a typo, not a missing run)."""
    for claim in claims:
        for setting in claim.settings:
            for name, spec in fill(dict(claim.operands), setting).items():
                for key in spec_keys(spec):
                    if checks.missing_in_present_report(key):
                        raise _err(
                            claim.source,
                            claim.id,
                            f"operands.{name}",
                            f"no cell {key!r} in the present report of its target",
                            "use a key from results/checks/<target>.json cells[].key",
                        )
