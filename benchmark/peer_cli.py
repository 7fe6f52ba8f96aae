"""``flb peer``: this suite's runner beside a paper's released code on one reduced configuration (issue 26;
:mod:`benchmark.peers`, ``docs/peers.md``).

    flb peer FAMILY --official-repo PATH [--config NAME] [--seeds S ...] [--python PY] [--workdir DIR]
                    [--no-record] [--replace]
    flb peer --list
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmark.errors import ConfigError
from benchmark.ledger import LEDGER_DIR
from benchmark.peers.compare import render
from benchmark.peers.registry import PeerRequest, get_family, load_families
from benchmark.peers.run import run_peer


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="flb peer", description="compare this suite with a paper's released code"
    )
    ap.add_argument("family", nargs="?", help="fedbabu, legate2023, mezo (flb peer --list)")
    ap.add_argument(
        "--list", action="store_true", help="the families, their configurations and released code"
    )
    ap.add_argument("--official-repo", type=Path, help="your checkout of the paper's released code")
    ap.add_argument("--config", default=None, help="a configuration of the family (default: its first, tiny)")
    ap.add_argument("--seeds", nargs="+", type=int, default=None, help="seeds (default: the family's)")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter of the released code's environment (default: this one)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=1, help="torch threads per side (default 1)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="scratch folder for the released code's outputs (default results/peers/work/FAMILY)")  # fmt: skip
    ap.add_argument("--ledger", default=str(LEDGER_DIR), help="the ledger folder (default: runs/)")
    ap.add_argument("--no-record", action="store_true", help="write results/peers/... but record nothing")
    ap.add_argument(
        "--replace", action="store_true", help="replace a recorded comparison of the same identity"
    )
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        for name, fam in sorted(load_families().items()):
            print(f"{name:<12} {fam.paper:<12} {fam.official_url}  configs: {', '.join(fam.configs)}")
        return 0
    if not args.family:
        raise ConfigError(
            "flb peer needs a FAMILY", "e.g. flb peer fedbabu --official-repo PATH (flb peer --list)"
        )
    if args.official_repo is None:
        fam = get_family(args.family)
        raise ConfigError(
            "flb peer needs --official-repo PATH", f"clone {fam.official_url} and pass its path"
        )
    fam = get_family(args.family)
    request = PeerRequest(
        family=fam.name, config_name=args.config or fam.default_config,
        seeds=tuple(args.seeds) if args.seeds else fam.default_seeds,
        official_repo=args.official_repo.resolve(),
        workdir=(args.workdir or Path("results/peers/work") / fam.name).resolve(),
        python=args.python, threads=args.threads,
    )  # fmt: skip
    outcome = run_peer(
        request, ledger_dir=None if args.no_record else Path(args.ledger), replace=args.replace
    )
    print(render(outcome.comparison), end="")
    print(f"written: {outcome.json_path} and {outcome.markdown_path}")
    if outcome.record is not None:
        print(f"recorded: {outcome.record.folder}")
    return 0
