"""Peer comparisons: this suite's runners beside the papers' released code on one reduced configuration
(issue 26; ``flb peer``, ``docs/peers.md``).

* :mod:`benchmark.peers.compare`: the typed comparison and its agreement rule;
* :mod:`benchmark.peers.registry`: the families and what a family is asked to run;
* :mod:`benchmark.peers.run`: runs a family, writes ``results/peers/...`` and records it in the ledger;
* one module per family (:data:`FAMILIES`); ``drivers/`` holds the scripts this suite runs **inside** the
  released code's environment (our code; nothing of the released code is kept in this repository).
"""

from __future__ import annotations

#: The family modules under ``benchmark/peers/`` (each registers itself at import).
FAMILIES: tuple[str, ...] = ("fedbabu", "legate2023", "mezo")
