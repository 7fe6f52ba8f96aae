"""``flb plot``: accuracy curves of several methods overlaid: vs rounds, vs communication, vs compute
(legate2023 Fig. 1; fedcof Fig. 3-4, 7), from the curve CSVs that ``flb fl-run --curve`` writes.

The curves are read and averaged by :mod:`benchmark.curves` and drawn by :mod:`benchmark.curve_plots` (the
library; this module is their command line and keeps their names importable from here).

Command line::

    flb plot --out fig.png [--title T] [--axes round,communication,compute] \
        "LP=run-s0-curve.csv,run-s1-curve.csv" "FedNCM+LP=..."
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmark.curve_plots import draw_curves, plot_curves
from benchmark.curves import (
    AXES,
    INIT_STAGE,
    Axis,
    CurveLike,
    as_frame,
    curve,
    curves_data,
    mean_curve,
    x_values,
)
from benchmark.errors import BenchmarkError, ConfigError

__all__ = [
    "AXES", "INIT_STAGE", "Axis", "CurveLike", "as_frame", "curve", "curves_data", "draw_curves", "main",
    "mean_curve", "plot_curves", "x_values",
]  # fmt: skip


def _parse_series(items: Sequence[str]) -> dict[str, list[Path]]:
    out: dict[str, list[Path]] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"expected LABEL=curve.csv[,curve.csv...], got {item!r}", "name each series")
        label, paths = item.split("=", 1)
        files = [Path(p) for p in paths.split(",") if p]
        if not label or not files:
            raise ConfigError(f"empty label or file list in {item!r}", "write LABEL=a.csv,b.csv")
        missing = [str(p) for p in files if not p.is_file()]
        if missing:
            raise ConfigError(
                f"curve file(s) not found: {', '.join(missing)}", "run flb fl-run --curve first"
            )
        out.setdefault(label, []).extend(files)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``flb plot`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flb plot", description=__doc__.splitlines()[0])
    ap.add_argument("series", nargs="+", help="LABEL=curve.csv[,curve.csv...] (several files = seeds)")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--title", default=None)
    ap.add_argument(
        "--axes", default="round,communication,compute", help=f"comma-separated of {', '.join(AXES)}"
    )
    ap.add_argument("--linear-cost", action="store_true", help="linear (not log) cost axes")
    args = ap.parse_args(argv)
    try:
        series = _parse_series(args.series)
        axes = [a for a in args.axes.split(",") if a]
        out = plot_curves(series, args.out, axes=axes, title=args.title, log_cost=not args.linear_cost)  # type: ignore[arg-type]
    except BenchmarkError as err:
        print(f"plots: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
