"""``flb claims``: evaluate the claims/ catalogue on the check reports and figure data.

    flb claims --checks results/checks --figures results/figures --out results/claims [--catalogue claims/]

Every quote is first checked against its line of the document's text
(:func:`benchmark.claims.quotes.check_quotes`): a misplaced quote is one error naming the claim and where the
words are. Writes results/claims/<paper>.json (one per catalogue file, atomically) and prints a one-screen
summary: per paper the counts of HOLDS / DOES NOT HOLD / NOT RUN on our results and on the paper's own numbers, then
the claims that do not hold (ours) and those the paper's own printed values contradict.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.claims.catalogue import check_keys, load_catalogue
from benchmark.claims.evaluate import write_reports
from benchmark.claims.quotes import check_quotes
from benchmark.claims.sources import CheckIndex, FigureStore
from benchmark.errors import BenchmarkError
from benchmark.portable import portable
from benchmark.tables.summary import shorten

DEFAULT_CATALOGUE = Path(__file__).resolve().parents[2] / "claims"


def summary(docs: Mapping[str, Mapping[str, Any]], width: int = 110) -> str:
    """The one-screen summary printed by the command (reasons shortened at a word boundary to ``width``)."""
    lines = [f"{'paper':<14}{'HOLDS':>7}{'NOT HOLD':>10}{'NOT RUN':>9}   on the paper's numbers: holds / not"]
    for paper, doc in docs.items():
        c, p = doc["counts"], doc["paper_counts"]
        lines.append(
            f"{paper:<14}{c['HOLDS']:>7}{c['DOES NOT HOLD']:>10}{c['NOT RUN']:>9}   "
            f"{p['HOLDS']:>3} / {p['DOES NOT HOLD']}"
        )
    listed = False
    for title, pick in (
        ("does not hold on our results:", lambda r: r["verdict"] == "DOES NOT HOLD"),
        ("contradicted by the paper's own numbers:", lambda r: r["paper_verdict"] == "DOES NOT HOLD"),
    ):
        rows = [r for doc in docs.values() for r in doc["claims"] if pick(r)]
        if rows:
            listed = True
            lines.append(title)
            for r in rows:
                why = r["reason"] if title.startswith("does") else r["paper_reason"]
                lines.append("  " + shorten(f"{r['id']}: {why}", width - 2))
    if listed:
        lines.append("(every reason in full: results/claims/<paper>.json and the report's claims)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="flb claims", description=__doc__.splitlines()[0])
    ap.add_argument("--checks", required=True, help="folder of check reports (results/checks)")
    ap.add_argument("--figures", default=None, help="folder of figure data NAME.csv (results/figures)")
    ap.add_argument("--out", required=True, help="folder to write <paper>.json into (results/claims)")
    ap.add_argument("--catalogue", default=str(DEFAULT_CATALOGUE), help="the claims/ folder of <paper>.yaml")
    args = ap.parse_args(argv)
    try:
        catalogue = load_catalogue(args.catalogue)
        absent = check_quotes(c for claims in catalogue.values() for c in claims)
        checks = CheckIndex(args.checks)
        for claims in catalogue.values():
            check_keys(claims, checks)
        docs = write_reports(catalogue, checks, FigureStore(args.figures), args.out)
    except BenchmarkError as err:
        print(f"flb: error: {err}", file=sys.stderr)
        return 2
    for path in absent:
        print(f"flb claims: note: quotes not checked against {portable(str(path))} (not found; set FLB_PAPERS_DIR to check them)")
    print(summary(docs))
    print(f"wrote {', '.join(str(Path(args.out) / f'{p}.json') for p in docs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
