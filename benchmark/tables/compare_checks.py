"""Cell-by-cell comparison of two folders of table checks (``results/checks/*.json``).

Used to show what a change did to the verdicts: save the checks of every target before the change, rebuild,
then::

    python -m benchmark.tables.compare_checks BEFORE_DIR results/checks [--fields verdict,ours_mean,reason]

prints every cell whose compared fields differ (and cells present on one side only) and exits 1 when any
differs, 0 when the two folders agree cell by cell.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.errors import ConfigError

#: Fields of a check compared by default: the value, the verdict and its reason.
DEFAULT_FIELDS = ("verdict", "ours_mean", "ours_std", "reason")


@dataclass(frozen=True)
class CellChange:
    """One cell whose compared fields differ between the two folders (``None`` side: cell absent)."""

    target: str
    key: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    def describe(self, fields: Sequence[str]) -> str:
        if self.before is None or self.after is None:
            side = "only after" if self.before is None else "only before"
            cell = self.after or self.before or {}
            return f"{self.target} {self.key}: {side} ({cell.get('verdict')})"
        diffs = [
            f"{f}: {self.before.get(f)!r} -> {self.after.get(f)!r}"
            for f in fields
            if self.before.get(f) != self.after.get(f)
        ]
        return f"{self.target} {self.key}: " + "; ".join(diffs)


def load_checks(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``{target: {cell key: check}}`` of every ``*.json`` in ``folder``."""
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder of checks", "pass a results/checks folder (or a saved copy)")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text())
            out[doc.get("target", path.stem)] = {c["key"]: c for c in doc["cells"]}
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ConfigError(f"{path} is not a checks file ({err})", "rebuild it with its table target") from None
    return out


def compare_checks(
    before: dict[str, dict[str, dict[str, Any]]],
    after: dict[str, dict[str, dict[str, Any]]],
    fields: Sequence[str] = DEFAULT_FIELDS,
) -> list[CellChange]:
    """Every cell of a target present on both sides whose ``fields`` differ, or that exists on one side only."""
    changes: list[CellChange] = []
    for target in sorted(set(before) & set(after)):
        b, a = before[target], after[target]
        for key in sorted(set(b) | set(a)):
            cb, ca = b.get(key), a.get(key)
            if cb is None or ca is None or any(cb.get(f) != ca.get(f) for f in fields):
                changes.append(CellChange(target, key, cb, ca))
    return changes


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmark.tables.compare_checks", description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--fields", default=",".join(DEFAULT_FIELDS), help="comma-separated check fields to compare")
    args = ap.parse_args(argv)
    fields = [f for f in args.fields.split(",") if f]
    try:
        before, after = load_checks(args.before), load_checks(args.after)
    except ConfigError as err:
        print(f"compare_checks: error: {err}", file=sys.stderr)
        return 2
    only = sorted(set(before) ^ set(after))
    changes = compare_checks(before, after, fields)
    for c in changes:
        print(c.describe(fields))
    if only:
        print("targets on one side only: " + ", ".join(only))
    n = sum(len(v) for t, v in after.items() if t in before)
    print(f"{len(changes)} of {n} cells differ ({', '.join(fields)}) over {len(set(before) & set(after))} targets")
    return 1 if changes or only else 0


if __name__ == "__main__":
    sys.exit(main())
