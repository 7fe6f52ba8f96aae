"""Claims as checks (issue 14): the papers' comparative statements, evaluated on our results.

The catalogue ``claims/<paper>.yaml`` quotes each claim (document, line, exact words), states our operational
reading, and names a kind (:mod:`benchmark.claims.kinds`: ordering, within, monotone, fewer_rounds, cost,
ratio, bound), operands (check-report cells, figure data, constants, differences:
:mod:`benchmark.claims.sources`) and rule parameters. :mod:`benchmark.claims.evaluate` decides each claim on
our values (HOLDS / DOES NOT HOLD / NOT RUN, with the rule and the numbers) and on the paper's own printed
values (``paper_verdict``); ``flb claims`` (:mod:`benchmark.claims.cli`) writes results/claims/<paper>.json.
"""

from benchmark.claims.catalogue import check_keys, load_catalogue, load_file
from benchmark.claims.evaluate import evaluate_claim, evaluate_paper, write_reports
from benchmark.claims.kinds import KINDS
from benchmark.claims.model import DOES_NOT_HOLD, HOLDS, NOT_RUN, Claim, ClaimResult
from benchmark.claims.quotes import PAPER_FILES, papers_dir, quote_on_line
from benchmark.claims.sources import CheckIndex, FigureStore

__all__ = [
    "DOES_NOT_HOLD",
    "HOLDS",
    "KINDS",
    "NOT_RUN",
    "PAPER_FILES",
    "CheckIndex",
    "Claim",
    "ClaimResult",
    "FigureStore",
    "check_keys",
    "evaluate_claim",
    "evaluate_paper",
    "load_catalogue",
    "load_file",
    "papers_dir",
    "quote_on_line",
    "write_reports",
]
