"""Communication and compute accounting: what crosses the wire per method, and what clients compute.

* :mod:`~benchmark.costs.conventions`: bytes per float, MB vs MiB, directions, participation, class
  counting, each paper's stated convention and the named departures from it.
* :mod:`~benchmark.costs.model_facts`: parameter counts (torchvision constructors, heads as in the papers'
  code) and dataset facts.
* :mod:`~benchmark.costs.comm`: per-method uplink/downlink float counts.
* :mod:`~benchmark.costs.compute`: legate2023 Eq. 5-6 compute in units of F.
* :mod:`~benchmark.costs.paper_cells`: every printed cost cell recomputed, with its verdict.
"""

from benchmark.costs.comm import (
    Traffic,
    class_count_matrix,
    fed3r_traffic,
    fedcof_means_per_pair,
    fedcof_oracle_traffic,
    fedcof_traffic,
    fedncm_ft_traffic,
    fedncm_traffic,
    ft_round_traffic,
    head_params,
    legate2023_comm_floats,
    lp_round_traffic,
    present_classes_per_client,
)
from benchmark.costs.compute import fedncm_compute, fedncm_ft_compute, legate2023_compute, samples_per_round
from benchmark.costs.model_facts import ParamCount, dataset_facts, param_count

__all__ = [
    "ParamCount",
    "Traffic",
    "class_count_matrix",
    "dataset_facts",
    "fed3r_traffic",
    "fedcof_means_per_pair",
    "fedcof_oracle_traffic",
    "fedcof_traffic",
    "fedncm_compute",
    "fedncm_ft_compute",
    "fedncm_ft_traffic",
    "fedncm_traffic",
    "ft_round_traffic",
    "head_params",
    "legate2023_comm_floats",
    "legate2023_compute",
    "lp_round_traffic",
    "param_count",
    "present_classes_per_client",
    "samples_per_round",
]
