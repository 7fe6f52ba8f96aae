"""``flb site``: build the static HTML report from ``results/`` (issue 14).

    flb site --results results --findings expected/known_findings.yaml --out results/report

Writes ``index.html`` (per paper: table verdict totals, claims verdicts, figures built / not run; a stamp of
when, where and at which commit), one page per paper (``legate2023.html`` ...) and ``provenance.html``, the
style sheet they share (``style.css``) and the figures' PNGs copied to ``assets/``. The site is built in a temporary folder beside ``--out`` and then
swapped in, so a reader never sees half a site; ``--out`` must be absent or a site this command built (it
holds :data:`MARKER`), so that no other folder is ever replaced. A failed write (disk full, read-only) is one
error naming the folder; the temporary folder is removed and the previous site stays as it was. The pages
name this machine's folders by symbols (``$FLB_DATA_ROOT``, ...: :mod:`benchmark.portable`), so a copy can
be committed (``docs/report/``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError, ConfigError
from benchmark.expected import PAPERS
from benchmark.portable import portable
from benchmark.report import Stamp, stamp_now
from benchmark.report_guard import WRITE_FAILURES, ReportWriteError, write_failure_reason
from benchmark.site import render
from benchmark.site.inputs import Inputs, load_config_or_none, load_inputs
from benchmark.site.sources import Source, collect_sources

MARKER = ".flb-site"
ROOT = Path(__file__).resolve().parents[2]
PAGES = ("index.html", *(f"{p}.html" for p in PAPERS), "provenance.html")


def write_site(folder: Path, inputs: Inputs, sources: Sequence[Source], stamp: Stamp) -> list[Path]:
    """Write every page and asset into ``folder`` (which must exist); returns the pages written."""
    assets: dict[str, str] = {}
    fig_dir = folder / "assets" / "figures"
    for fig in inputs.figures:
        if fig.png is not None:
            fig_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(fig.png, fig_dir / f"{fig.name}.png")
            assets[fig.name] = f"assets/figures/{fig.name}.png"
    ids = frozenset(s.id for s in sources)
    pages = {
        "index.html": render.index_page(inputs, stamp),
        "provenance.html": render.provenance_page(sources, stamp),
    }
    for paper in PAPERS:
        pages[f"{paper}.html"] = render.paper_page(paper, inputs, stamp, assets, ids)
    (folder / render.STYLESHEET).write_text(render.CSS, encoding="utf-8")
    out = []
    for name, text in pages.items():
        (folder / name).write_text(portable(text), encoding="utf-8")
        out.append(folder / name)
    (folder / MARKER).write_text(portable(f"built by `{stamp.command}` at {stamp.when}\n"), encoding="utf-8")
    return out


def replace_dir(new: Path, dest: Path) -> None:
    """Put the finished folder ``new`` at ``dest``: rename the old site aside, rename ``new`` in, delete the old."""
    if dest.exists() and not (dest / MARKER).is_file():
        raise ConfigError(
            f"{dest} exists and is not a site built by `flb site` (no {MARKER} in it)",
            "pass another --out, or remove that folder yourself",
        )
    old = None
    if dest.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old.", dir=dest.parent))
        os.replace(dest, old / "site")
    try:
        os.replace(new, dest)
    except OSError:
        if old is not None:  # put the previous site back
            os.replace(old / "site", dest)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def build_site(
    results: str | Path,
    out: str | Path,
    *,
    findings: str | Path | None = None,
    records: str | Path | None = None,
    config: Mapping[str, Any] | None = None,
    stamp: Stamp | None = None,
) -> Path:
    """Build the site of ``results`` into ``out`` (atomically); returns ``out``. ``records``: the folder of
    committed run records (``docs/runs``); ``config``: the workflow config for the figure registry's status."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise ConfigError(
            f"results folder {results} does not exist", "run the tables first, or pass --results"
        )
    inputs = load_inputs(results, Path(findings) if findings else None, config)
    sources = collect_sources(results, inputs.figures, Path(records) if records else None)
    stamp = stamp or stamp_now("flb site")
    tmp = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.new.", dir=out.parent))
        write_site(tmp, inputs, sources, stamp)
        tmp.chmod(0o755)
        replace_dir(tmp, out)
    except WRITE_FAILURES as exc:
        raise ReportWriteError(
            f"cannot write the report into {out}: {write_failure_reason(exc)} (nothing was changed: "
            + ("the previous report is intact)" if (out / MARKER).is_file() else "no report was there)"),
            "free space on that disk (or make it writable) and run the command again",
        ) from exc
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="flb site", description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results", help="results folder (checks/, claims/, figures/, tidy/)")
    ap.add_argument("--findings", default=str(ROOT / "expected" / "known_findings.yaml"))
    ap.add_argument(
        "--records", default=str(ROOT / "docs" / "runs"), help="committed run records (docs/runs)"
    )
    ap.add_argument(
        "--config", default=None, help="workflow config for the figure status (default config/config.yaml)"
    )
    ap.add_argument("--out", default="results/report")
    args = ap.parse_args(argv)
    try:
        config = load_config_or_none(Path(args.config) if args.config else None)
        command = "flb site " + " ".join(argv if argv is not None else [])
        out = build_site(
            args.results,
            args.out,
            findings=args.findings or None,
            records=args.records or None,
            config=config,
            stamp=stamp_now(command.strip()),
        )
    except BenchmarkError as exc:
        print(f"flb: error: {exc}", file=sys.stderr)
        return 2
    print(f"flb site: wrote {out}/ ({', '.join(PAGES)})")
    return 0
