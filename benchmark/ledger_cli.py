"""``flb runs``: the ledger of recorded runs (:mod:`benchmark.ledger`).

    flb runs import PATH [--targets T ...] [--manifest M] [--commit SHA] [--note TEXT] [--source TEXT]
                         [--config key=value ...] [--replace]
    flb runs list [--stale]
    flb runs verify
    flb runs show CELL|OUTPUT-PATH|RECORD-ID
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmark.errors import ConfigError
from benchmark.ledger import LEDGER_DIR, RunRecord, read_record, record_folders, short_machine, verify_all
from benchmark.ledger_import import ImportOptions, import_results, planned_jobs
from benchmark.tables.spec import SPEC_DIR
from benchmark.workflow import load_config, parse_kv


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="flb runs", description="the ledger of recorded runs (runs/)")
    ap.add_argument("--ledger", default=str(LEDGER_DIR), help="the ledger folder (default: runs/)")
    sub = ap.add_subparsers(dest="action", required=True)
    p = sub.add_parser("import", help="record the finished jobs found in a results tree")
    p.add_argument("path", help="a folder holding results/ (this checkout, a GPU's output, a cluster's), or one "
                   "job's output file")
    p.add_argument("--targets", nargs="*", default=None, help="targets whose planned jobs to look for (default: all)")
    p.add_argument("--manifest", default=None, help="a harvest manifest (start/end times, commands, machine)")
    p.add_argument("--commit", default=None, help="the commit whose code ran, when the files name another")
    p.add_argument("--note", action="append", default=[], help="a note kept with every record (repeatable)")
    p.add_argument("--source", default="", help="where the files come from (kept with the records)")
    p.add_argument("--caveat", action="append", default=[],
                   help="what every verdict from these records must say, shown with it in the tables (repeatable)")
    p.add_argument("--config", action="append", default=[], help="config override key=value (repeatable)")
    p.add_argument("--replace", action="store_true", help="replace a record of the same job made by another run")
    p = sub.add_parser("list", help="one line per record")
    p.add_argument("--stale", action="store_true", help="only the stale records")
    sub.add_parser("verify", help="check every record's files against their checksums")
    p = sub.add_parser("show", help="the record(s) of a cell id, an output path or a record id")
    p.add_argument("what")
    return ap


def _line(r: RunRecord) -> str:
    state = "STALE" if r.stale else "ok"
    return (f"{r.job.KIND:<18} {r.id}  {state:<5} {r.provenance.date}  {short_machine(r.provenance.machine)[:28]:<28} "
            f"{r.provenance.code_commit[:8]}  {r.job.path}")  # fmt: skip


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    ledger = Path(args.ledger)
    if args.action == "import":
        return _import(args, ledger)
    if args.action == "list":
        records = [read_record(f, verify=False) for f in record_folders(ledger)]
        for r in records:
            if r.stale or not args.stale:
                print(_line(r))
        stale = sum(r.stale for r in records)
        print(f"{len(records)} records ({stale} stale) in {ledger}/")
        return 0
    if args.action == "verify":
        good, bad = verify_all(ledger)
        for line in bad:
            print(f"DAMAGED {line}")
        print(f"{len(good)} records verified, {len(bad)} damaged, {sum(r.stale for r in good)} stale")
        return 1 if bad else 0
    return _show(args.what, ledger)


def _import(args: argparse.Namespace, ledger: Path) -> int:
    overrides = parse_kv(args.config)
    cfg = load_config(None, overrides)
    if "pfl_both_selections" not in overrides:  # look for the outputs of both model selections, whatever the default
        cfg["pfl_both_selections"] = True
    if not cfg.get("device") and not cfg.get("cpu_training"):
        cfg["cpu_training"] = True  # plan every training job, whatever this machine is
    targets = args.targets or sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))
    manifest = json.loads(Path(args.manifest).read_text()) if args.manifest else None
    options = ImportOptions(args.commit, tuple(args.note), args.source or str(args.path), manifest, args.replace,
                            tuple(args.caveat))
    kept: list[str] = []
    jobs = planned_jobs(targets, cfg)
    path = Path(args.path)
    if not path.exists():
        raise ConfigError(f"{path} does not exist", "name a folder holding results/ or one job's output file")
    if path.is_file():  # one job's output: record that job only
        root, rel = _split_results_path(path)
        jobs = [j for j in jobs if j.path == rel]
        if not jobs:
            raise ConfigError(f"{path} is not the output of a planned job of {', '.join(targets)}",
                              "name a job's output file (results/...) and the target it belongs to (--targets)")  # fmt: skip
        path = root
    records = import_results(path, jobs, options, ledger, kept)
    for r in records:
        print(f"recorded {_line(r)}")
    for line in kept:
        print(f"kept     {line} (pass --replace to record this run instead)")
    print(f"{len(records)} runs recorded in {ledger}/, {len(kept)} already recorded from another run kept")
    if not records and not kept:
        raise ConfigError(f"no output of a planned job of {', '.join(targets)} under {args.path}",
                          "name the folder holding results/ and the targets those runs belong to")  # fmt: skip
    return 0


def _split_results_path(path: Path) -> tuple[Path, str]:
    """``(the folder holding results/, the path from there)`` of a job's output file."""
    parts = path.resolve().parts
    if "results" not in parts:
        raise ConfigError(f"{path} is not under a results/ folder", "name a job's output file (results/...)")
    i = len(parts) - 1 - parts[::-1].index("results")
    return Path(*parts[:i]), "/".join(parts[i:])


def _show(what: str, ledger: Path) -> int:
    """The records whose id or output path is (or contains) ``what``, or that filled a cell whose key contains
    ``what`` in the built tables' checks (``results/checks/*.json``)."""
    by_cell = _cell_records(what)
    matches = []
    for folder in record_folders(ledger):
        r = read_record(folder, verify=False)
        name = f"{LEDGER_DIR}/{r.job.KIND}/{r.id}"
        if what in (r.id, r.job.path) or what in r.job.path or name in by_cell:
            matches.append(read_record(folder))
    if not matches:
        raise ConfigError(f"no record matches {what!r} in {ledger}/",
                          "give a record id, an output path, or a cell of a built table (see `flb runs list`)")  # fmt: skip
    for r in matches:
        p = r.provenance
        cells = by_cell.get(f"{LEDGER_DIR}/{r.job.KIND}/{r.id}", [])
        print(f"{r.folder}\n  job: {json.dumps(r.job.__dict__ | {'kind': r.job.KIND}, sort_keys=True)}")
        print(f"  numerics: v{r.numerics} (code: v{r.current_numerics}){'  STALE' if r.stale else ''}")
        for key in ("code_commit", "reported_commit", "machine", "versions", "device", "threads", "precision",
                    "start", "end", "wall_s", "command", "source"):  # fmt: skip
            value = getattr(p, key)
            if value not in ("", None):
                print(f"  {key}: {value}")
        for caveat in p.caveats:
            print(f"  caveat: {caveat}")
        for note in p.notes:
            print(f"  note: {note}")
        for cell in cells:
            print(f"  fills: {cell}")
        for rel, meta in sorted(r.files.items()):
            print(f"  file: {rel} ({meta['bytes']} B, sha256 {meta['sha256'][:12]})")
    return 0


def _cell_records(what: str, checks: Path = Path("results/checks")) -> dict[str, list[str]]:
    """Record folder (``runs/<kind>/<id>``) -> the cells (``<target>: <key>``) it filled in the built tables whose
    key contains ``what``."""
    out: dict[str, list[str]] = {}
    for path in sorted(checks.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for cell in data.get("cells", []) if isinstance(data, dict) else []:
            key = str(cell.get("key", ""))
            if what not in key:
                continue
            for job in (cell.get("recorded") or {}).get("jobs", []):
                out.setdefault(str(job.get("record")), []).append(f"{path.stem}: {key}")
    return out
