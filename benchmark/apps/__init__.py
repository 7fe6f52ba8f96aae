"""Applications on top of the library, reached through ``flb`` subcommands (issue 10: library, catalogue and
applications apart). Each is one module with its own ``main(argv)``; ``flb NAME ARGS...`` hands ``ARGS`` to it
unparsed, so ``flb NAME --help`` shows the application's own options.

* ``flb pin-reduced`` - :mod:`benchmark.apps.reduced`: the reduced CPU FT / FedNCM+FT configuration of
  legate2023 Table 2 and its pinned values (``expected/pinned/``).
* ``flb tune-lr`` - :mod:`benchmark.apps.tuning`: the client-lr grid on a validation split of the training set.
* ``flb plot`` - :mod:`benchmark.apps.plots`: accuracy vs rounds / communication / compute from curve CSVs.

The GPU throughput benchmark is not here but in ``tools/gpu_bench.py``: it must run on a machine with only
torch installed.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

#: ``flb`` subcommand -> (module with ``main(argv)``, one-line help).
APPS: dict[str, tuple[str, str]] = {
    "pin-reduced": (
        "benchmark.apps.reduced",
        "reduced CPU FT / FedNCM+FT run: compare with, or (--write-pinned) rewrite, expected/pinned/",
    ),
    "tune-lr": ("benchmark.apps.tuning", "client-lr grid on a validation split of the training set"),
    "plot": ("benchmark.apps.plots", "accuracy vs rounds / communication / compute from curve CSVs"),
    "figure": ("benchmark.figures.render", "draw a registered paper figure (PNG, PDF, data CSV, manifest)"),
    "site": ("benchmark.site.build", "build the static HTML report from results/"),
    "site-check": (
        "benchmark.site.browser",
        "load the report in headless Chromium: pages, tables, images, links; screenshot",
    ),
    "claims": ("benchmark.claims.cli", "evaluate the claims/ catalogue on the check reports and figure data"),
    "runs": ("benchmark.ledger_cli", "the ledger of recorded runs (runs/): import, list, verify, show"),
    "peer": ("benchmark.peer_cli", "this suite's runner beside a paper's released code on one reduced configuration"),
    "estimate": ("benchmark.estimate_cli", "what building targets would cost (per job kind, H100- or CPU-hours)"),
    "seeds-needed": ("benchmark.seeds_cli", "the numbers one seed cannot decide, and the units whose next seed would"),
    "harvest": (
        "benchmark.harvest_cli",
        "run unrun planned training jobs by cells per estimated minute within a time budget; record them",
    ),
}


def register(sub: argparse._SubParsersAction) -> None:
    """List the applications in ``flb --help`` (their arguments are parsed by :func:`dispatch`)."""
    for name, (_, help_text) in APPS.items():
        sub.add_parser(name, help=help_text, add_help=False)


def dispatch(argv: Sequence[str]) -> int | None:
    """Run the application named by ``argv[0]`` with the rest of ``argv``; ``None`` if it names none."""
    if not argv or argv[0] not in APPS:
        return None
    module = importlib.import_module(APPS[argv[0]][0])
    return module.main(list(argv[1:]))
