"""``flb figure NAME --out results/figures/NAME.png``: draw one registered figure and write, atomically,
its PNG, PDF, plotted data (CSV) and manifest (JSON) side by side.

The manifest is what the report (:mod:`benchmark.site`) and the claims (:mod:`benchmark.claims`) read:
name, paper, label, caption line, title, the paper's readings beside ours, notes (departures, substitutes,
series not run), every input file with its sha256, and the provenance of the drawing (commit, machine,
versions, time). The config comes from ``config/config.yaml`` with ``--set key=value`` overrides, or whole
from ``--config-json`` (the Snakemake rule passes its config so).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from benchmark import provenance
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.figures.registry import DrawnFigure, FigureSpec, figure_status, get_figure
from benchmark.io import atomic_path, atomic_write_json, atomic_write_text, sha256_file
from benchmark.ledger import materialised_from, read_record
from benchmark.report_guard import config_build
from benchmark.workflow import DEFAULT_CONFIG, parse_kv

MANIFEST_KEYS = ("name", "paper", "label", "line", "title", "copies", "status", "png", "pdf", "data",
                 "readings", "notes", "inputs", "provenance", "built_with")  # fmt: skip


def _input(path: str) -> dict[str, Any]:
    """One input of a figure: its path and sha256, and the recorded run it came from (``runs/``), if any."""
    out: dict[str, Any] = {"path": str(path), "sha256": sha256_file(path)}
    folder = materialised_from(path)
    if folder is not None:
        rec = read_record(Path(folder))
        out["recorded"] = {"record": folder, "label": rec.label(), "date": rec.provenance.date,
                           "machine": rec.provenance.machine, "commit": rec.provenance.code_commit}  # fmt: skip
    return out


def manifest(spec: FigureSpec, drawn: DrawnFigure, inputs: Sequence[str], stem: str, built_with: str) -> dict[str, Any]:
    """The JSON manifest of a drawn figure (keys :data:`MANIFEST_KEYS`); ``built_with`` is the configuration
    label it was drawn under (:func:`benchmark.report_guard.config_build`), so a report counts only the
    figures of its own build."""
    commit = provenance.git_commit()
    return {
        "name": spec.name,
        "paper": spec.paper,
        "label": spec.label,
        "line": spec.line,
        "title": spec.title,
        "copies": list(spec.copies),
        "status": "ok",
        "png": f"{stem}.png",
        "pdf": f"{stem}.pdf",
        "data": f"{stem}.csv",
        "readings": [asdict(r) for r in drawn.readings],
        "notes": list(drawn.notes),
        "inputs": [_input(p) for p in inputs if Path(p).is_file()],
        "provenance": {
            "git_commit": commit.removesuffix("+dirty"),
            "dirty": commit.endswith("+dirty"),
            "machine": provenance.machine(),
            "versions": provenance.package_versions(),
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        "built_with": built_with,
    }


def render(name: str, config: Mapping[str, Any], out: str | Path) -> dict[str, Any]:
    """Draw figure ``name`` under ``config``; write ``out`` (PNG) and its PDF, CSV, JSON; return the manifest."""
    spec = get_figure(name)
    reason = spec.why_not(config)
    if reason is not None:
        raise ConfigError(
            f"figure {name} does not run here: {reason}", "see `flb figure --list` for what runs"
        )
    assert spec.draw is not None
    inputs = spec.inputs(config)
    missing = [p for p in inputs if not Path(p).is_file()]
    if missing:
        raise ConfigError(
            f"figure {name}: {len(missing)} input file(s) missing, e.g. {missing[0]}",
            f"build them through the workflow: snakemake --cores all {name}",
        )
    drawn = spec.draw(config)
    png = Path(out)
    if png.suffix != ".png":
        raise ConfigError(f"--out {png} must end in .png", "the PDF, CSV and JSON are written beside it")
    stem = png.with_suffix("")
    for fmt in ("png", "pdf"):
        with atomic_path(stem.with_suffix(f".{fmt}"), suffix=f".{fmt}") as tmp:
            drawn.figure.savefig(tmp, format=fmt, dpi=120)
    atomic_write_text(stem.with_suffix(".csv"), drawn.data.to_csv(index=False))
    record = manifest(spec, drawn, inputs, stem.name, config_build(config).label)
    atomic_write_json(stem.with_suffix(".json"), record)
    return record


def _config(args: argparse.Namespace) -> dict[str, Any]:
    if args.config_json is not None:
        try:
            config = json.loads(args.config_json)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"--config-json is not valid JSON ({exc.msg})", "pass the workflow config"
            ) from exc
        return dict(config)

    config = yaml.safe_load(Path(DEFAULT_CONFIG).read_text()) or {}
    config.update(parse_kv(args.set))
    return config


def main(argv: Sequence[str] | None = None) -> int:
    """``flb figure`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="flb figure", description=__doc__.splitlines()[0])
    ap.add_argument("name", nargs="?", help="registered figure (flb figure --list)")
    ap.add_argument("--out", help="PNG to write (default results/figures/NAME.png)")
    ap.add_argument("--list", action="store_true", help="every registered figure and whether it runs here")
    ap.add_argument("--config-json", default=None, help="the whole workflow config as JSON")
    ap.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    args = ap.parse_args(argv)
    try:
        config = _config(args)
        if args.list or args.name is None:
            for st in figure_status(config):
                state = "runs" if st.reason is None else f"NOT RUN: {st.reason}"
                print(f"{st.spec.name:24s} {st.spec.paper:12s} {st.spec.label:12s} {state}")
            return 0
        out = args.out or f"results/figures/{args.name}.png"
        record = render(args.name, config, out)
    except BenchmarkError as err:
        print(f"flb figure: error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {out} (+ .pdf .csv .json): {record['label']} of {record['paper']}, {len(record['readings'])} readings"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
