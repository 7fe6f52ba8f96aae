"""Federated training engine: FedAvg / FedAvgM / FedAdam servers, SGD / FedProx clients, LP / FT / Random /
two-stage methods, cost accounting (legate2023 App. A) and curves.

Modules, one job each:

* :mod:`~benchmark.fl.config` - :class:`FLConfig`, one run's protocol, every paper quirk an explicit option.
* :mod:`~benchmark.federated.server_opt` - weighted delta averaging and the server optimisers.
* :mod:`~benchmark.fl.client` - a client's local SGD (momentum, weight decay, FedProx term).
* :mod:`~benchmark.fl.engine` - the round loop, client sampler, evaluation, per-round records and costs.
* :mod:`~benchmark.fl.lp_features` - LP / MLP head-tuning on cached features, vectorised across clients.
* :mod:`~benchmark.fl.methods` - LP, FT, Random, two-stage, centralised oracles; :func:`run_method`.
* :mod:`~benchmark.fl.protocols` - named paper protocols (:func:`get_protocol`).
* :mod:`~benchmark.fl.jobs` - the job steps (``flb fl-run`` on cached features, full-model training): tidy rows,
  per-round curve, record.
* ``lr_grid/`` - the recorded client-lr grids the protocols cite.

The applications built on the engine live apart: :mod:`benchmark.apps` (``flb tune-lr``, ``flb pin-reduced``,
``flb plot``) and
``tools/gpu_bench.py`` (torch only). Names are imported lazily (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FEDPROX_DEFAULT_MU": "benchmark.fl.config",
    "FLConfig": "benchmark.fl.config",
    "flsim_epochs_to_rounds": "benchmark.fl.config",
    "ClientSampler": "benchmark.federated.sampling",
    "Costs": "benchmark.federated.history",
    "RoundRecord": "benchmark.federated.history",
    "RunResult": "benchmark.fl.engine",
    "run_federated": "benchmark.fl.engine",
    "CachedFeatures": "benchmark.fl.lp_features",
    "run_lp_features": "benchmark.fl.lp_features",
    "run_method": "benchmark.fl.methods",
    "get_protocol": "benchmark.fl.protocols",
    "list_protocols": "benchmark.fl.protocols",
    "fl_run_step": "benchmark.fl.jobs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'benchmark.fl' has no attribute {name!r}")
