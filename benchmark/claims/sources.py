"""Operand sources: check reports (results/checks/<target>.json) and figure data (results/figures/NAME.csv).

Operand specs (after the setting's template fields are filled in):

* ``"paper/table#cell"`` or ``{cell: KEY}`` - a check-report cell: our per-seed values ``ours``, or the
  paper's printed ``paper`` value; a cell whose verdict is NOT RUN resolves to :class:`NotRun` with the cell's
  reason.
* ``{value: X}`` - a constant (a number the paper states in its text, e.g. "3.3%").
* ``{diff: [SPEC, SPEC]}`` - the first minus the second (SE of the difference: Welch, from the sides that
  have two or more values).
* ``{figure: NAME, series: S, x: X}`` - one point of a figure's tidy data (``x`` may be ``first``/``last``);
  without ``x`` the whole series, a :class:`Curve`.
* ``{cells: [KEY, ...], x: [X, ...]}`` - a curve made of check cells (e.g. accuracy per fine-tuning epoch).

Figure data carries no printed paper values, so in the paper's-numbers evaluation a figure operand resolves to
:class:`NotRun` (``paper_verdict`` is then null).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmark.claims.model import Curve, NotRun, Resolved, Sample
from benchmark.errors import ConfigError

OURS = "ours"
PAPER = "paper"


def target_of(key: str) -> str:
    """The check target whose report holds ``key``: ``legate2023/table3#...`` -> ``table3`` (the primary
    paper's bare targets), ``fedcof/table3#...`` -> ``fedcof_table3``."""
    prefix = key.split("#", 1)[0]
    paper, _, table = prefix.partition("/")
    return table if paper == "legate2023" else f"{paper}_{table}"


class CheckIndex:
    """All check reports of a folder, indexed by cell key."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.cells: dict[str, Mapping[str, Any]] = {}
        self.targets: set[str] = set()
        if self.folder.is_dir():
            for path in sorted(self.folder.glob("*.json")):
                try:
                    report = json.loads(path.read_text())
                except (OSError, json.JSONDecodeError) as err:
                    raise ConfigError(f"{path}: unreadable check report ({err})", "re-run the check") from err
                if not isinstance(report, Mapping) or "cells" not in report:
                    continue
                self.targets.add(str(report.get("target", path.stem)))
                self.targets.add(path.stem)
                for cell in report["cells"]:
                    self.cells[str(cell["key"])] = cell

    def has_report(self, key: str) -> bool:
        return target_of(key) in self.targets

    def missing_in_present_report(self, key: str) -> bool:
        """A key whose target's report exists but lacks it: a catalogue error, not a NOT RUN."""
        return key not in self.cells and self.has_report(key)


class FigureStore:
    """Tidy figure data (series, x, y, + optional columns), read lazily from ``<folder>/NAME.csv``."""

    def __init__(self, folder: str | Path | None) -> None:
        self.folder = Path(folder) if folder else None
        self._rows: dict[str, list[dict[str, str]] | None] = {}

    def rows(self, name: str) -> list[dict[str, str]] | None:
        if name not in self._rows:
            path = self.folder / f"{name}.csv" if self.folder else None
            if path is None or not path.is_file():
                self._rows[name] = None
            else:
                with path.open(newline="") as fh:
                    self._rows[name] = list(csv.DictReader(fh))
        return self._rows[name]


def _num(x: Any) -> float | str:
    try:
        return float(x)
    except (TypeError, ValueError):
        return str(x)


def _same_x(a: Any, b: Any) -> bool:
    fa, fb = _num(a), _num(b)
    if isinstance(fa, float) and isinstance(fb, float):
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)


def _x_order(x: float | str) -> tuple[int, float | str]:
    return (0, x) if isinstance(x, float) else (1, x)


class Resolver:
    """Turns operand specs into :class:`Sample` / :class:`Curve` / :class:`NotRun` for one mode."""

    def __init__(self, checks: CheckIndex, figures: FigureStore, mode: str = OURS) -> None:
        self.checks, self.figures, self.mode = checks, figures, mode

    # ---------------------------------------------------------------------------------------------- cells
    def cell(self, key: str) -> Sample | NotRun:
        cell = self.checks.cells.get(key)
        if cell is None:
            return NotRun(
                f"no such cell: {key} (report results/checks/{target_of(key)}.json absent: "
                f"snakemake --cores all {target_of(key)})",
                (key,),
            )
        if self.mode == PAPER:
            if cell.get("paper") is None:
                return NotRun(f"{key}: the paper prints no value", (key,))
            return Sample((float(cell["paper"]),), key, (key,))
        ours = [float(v) for v in (cell.get("ours") or [])]
        if cell.get("verdict") == "NOT RUN" or not ours:
            return NotRun(f"{key}: {cell.get('reason') or 'not run'}", (key,))
        return Sample(tuple(ours), key, (key,))

    # -------------------------------------------------------------------------------------------- figures
    def _series(
        self, name: str, series: str, where: Mapping[str, Any] | None = None
    ) -> list[dict[str, str]] | NotRun:
        if self.mode == PAPER:
            return NotRun(f"figure {name}: figure data has no printed paper values", figure=name)
        rows = self.figures.rows(name)
        if rows is None:
            return NotRun(f"figure {name} not built: snakemake --cores all {name}", figure=name)
        picked = [r for r in rows if str(r.get("series")) == series]
        for col, value in (where or {}).items():  # e.g. {axis: round}: one panel of a multi-panel figure
            picked = [r for r in picked if _same_x(r.get(col), value)]
        if not picked:
            have = sorted({str(r.get("series")) for r in rows})
            return NotRun(f"figure {name} has no series {series!r} (series: {', '.join(have)})", figure=name)
        return picked

    def figure_point(
        self, name: str, series: str, x: Any, where: Mapping[str, Any] | None = None
    ) -> Sample | NotRun:
        rows = self._series(name, series, where)
        if isinstance(rows, NotRun):
            return rows
        xs = sorted({_num(r["x"]) for r in rows}, key=_x_order)
        if x in ("first", "last"):
            x = xs[0] if x == "first" else xs[-1]
        at = [r for r in rows if _same_x(r["x"], x)]
        if not at:
            return NotRun(f"figure {name} series {series!r} has no point at x={x} (x: {xs})", figure=name)
        ys = tuple(float(r["y"]) for r in at)
        return Sample(ys, f"figure {name} series {series!r} x={x}", figure=name)

    def figure_curve(self, name: str, series: str, where: Mapping[str, Any] | None = None) -> Curve | NotRun:
        rows = self._series(name, series, where)
        if isinstance(rows, NotRun):
            return rows
        by_x: dict[float | str, list[float]] = {}
        for r in rows:
            by_x.setdefault(_num(r["x"]), []).append(float(r["y"]))
        xs = sorted(by_x, key=_x_order)
        points = [Sample(tuple(by_x[x]), name) for x in xs]
        return Curve(
            tuple(xs),
            tuple(p.mean for p in points),
            tuple(p.se for p in points),
            f"figure {name} series {series!r}",
            figure=name,
        )

    # ------------------------------------------------------------------------------------------- dispatch
    def resolve(self, spec: Any) -> Resolved:
        if isinstance(spec, str):
            return self.cell(spec)
        if "cell" in spec:
            return self.cell(str(spec["cell"]))
        if "value" in spec:
            return Sample((float(spec["value"]),), f"constant {float(spec['value']):g}")
        if "diff" in spec:
            return self._diff(spec["diff"])
        if "figure" in spec:
            where = spec.get("where")
            if "x" in spec:
                return self.figure_point(str(spec["figure"]), str(spec["series"]), spec["x"], where)
            return self.figure_curve(str(spec["figure"]), str(spec["series"]), where)
        if "cells" in spec:
            return self._cell_curve([str(k) for k in spec["cells"]], list(spec["x"]))
        raise AssertionError(f"unvalidated operand spec {spec!r}")  # the catalogue loader rejects it

    def _diff(self, parts: list[Any]) -> Sample | NotRun:
        a, b = self.resolve(parts[0]), self.resolve(parts[1])
        for side in (a, b):
            if isinstance(side, NotRun):
                return NotRun(side.reason, _keys(a) + _keys(b), side.figure)
        assert isinstance(a, Sample) and isinstance(b, Sample)
        spread = [s.se**2 for s in (a, b) if s.has_spread]
        source = f"({a.source}) - ({b.source})"
        figure = a.figure or b.figure
        if not spread:
            return Sample((a.mean - b.mean,), source, a.keys + b.keys, figure)
        return Sample(
            (),
            source,
            a.keys + b.keys,
            figure,
            mean_override=a.mean - b.mean,
            se_override=math.sqrt(sum(spread)),
        )

    def _cell_curve(self, keys: list[str], xs: list[Any]) -> Curve | NotRun:
        points = [self.cell(k) for k in keys]
        for p in points:
            if isinstance(p, NotRun):
                return NotRun(p.reason, tuple(keys))
        samples = [p for p in points if isinstance(p, Sample)]
        return Curve(
            tuple(_num(x) for x in xs),
            tuple(s.mean for s in samples),
            tuple(s.se for s in samples),
            f"cells {keys[0]} .. {keys[-1]}",
            tuple(keys),
        )


def _keys(r: Resolved) -> tuple[str, ...]:
    return r.keys


def evidence(name: str, r: Resolved) -> dict[str, Any]:
    """One evidence record: operand, source, values, mean, std, n (+ x for curves, reason for NOT RUN)."""
    if isinstance(r, NotRun):
        return {"operand": name, "source": r.reason, "values": [], "mean": None, "std": None, "n": 0}
    if isinstance(r, Curve):
        return {
            "operand": name,
            "source": r.source,
            "x": list(r.xs),
            "values": list(r.ys),
            "mean": None,
            "std": None,
            "n": len(r.ys),
        }
    rec: dict[str, Any] = {
        "operand": name,
        "source": r.source,
        "values": list(r.values),
        "mean": r.mean,
        "std": r.std if r.n else None,
        "n": r.n,
    }
    if r.se_override is not None:
        rec["se"] = r.se
    return rec
