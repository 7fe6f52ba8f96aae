"""Federated training engine: FedAvg / FedAvgM / FedAdam servers, SGD / FedProx clients, LP / FT / Random /
two-stage methods, cost accounting (legate2023 App. A) and curves.

Modules, one job each:

* :mod:`~benchmark.fl.config` - :class:`FLConfig`, one run's protocol, every paper quirk an explicit option.
* :mod:`~benchmark.fl.server_opt` - weighted delta averaging and the server optimisers.
* :mod:`~benchmark.fl.client` - a client's local SGD (momentum, weight decay, FedProx term).
* :mod:`~benchmark.fl.engine` - the round loop, client sampler, evaluation, per-round records and costs.
* :mod:`~benchmark.fl.lp_features` - LP / MLP head-tuning on cached features, vectorised across clients.
* :mod:`~benchmark.fl.methods` - LP, FT, Random, two-stage, centralised oracles; :func:`run_method`.
* :mod:`~benchmark.fl.plots` - accuracy vs rounds / communication / compute.
"""

from benchmark.fl.config import FEDPROX_DEFAULT_MU, FLConfig, flsim_epochs_to_rounds
from benchmark.fl.engine import ClientSampler, Costs, RoundRecord, RunResult, run_federated
from benchmark.fl.lp_features import CachedFeatures, run_lp_features
from benchmark.fl.methods import run_method

__all__ = [
    "FEDPROX_DEFAULT_MU",
    "CachedFeatures",
    "ClientSampler",
    "Costs",
    "FLConfig",
    "RoundRecord",
    "RunResult",
    "flsim_epochs_to_rounds",
    "run_federated",
    "run_lp_features",
    "run_method",
]
