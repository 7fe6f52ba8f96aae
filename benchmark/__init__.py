"""fl-pretrain-bench: a reproducibility suite for federated learning with pre-trained models.

Sub-packages, one job each:

* :mod:`benchmark.data` - dataset registry (loaders by name, checksums) and client partitions.
* :mod:`benchmark.models` - backbone registry (feature extractor / head split, weight sources).
* :mod:`benchmark.features` - batched feature extraction and the content-addressed feature cache.
* :mod:`benchmark.closed_form` - FedNCM, Fed3R, FedCOF and their centralised counterparts.
* :mod:`benchmark.costs` - communication and compute accounting of each paper.
* :mod:`benchmark.fl` - federated training engine (FedAvg, FedProx, FedAdam; LP, FT, two-stage).
"""

__version__ = "0.1.0"
