"""Closed-form heads: wall time of each method end to end (client statistics + server + evaluation).

* ``cifar_shaped``: 100 clients (Dirichlet alpha = 0.1 over classes), 100 classes, d = 1280 (MobileNetV2
  width), 50,000 synthetic train and 10,000 test features. Target (issue 3): the four methods FedNCM,
  Fed3R (fedcof form), Fed3R (official) and FedCOF under 2 s together. ``test_bench_all_four_joint`` runs
  them as the pipeline does (``run_methods``: one pass over the clients, each client's class sums and Gram
  computed once and shared by the four protocols); ``test_bench_all_four`` runs them one after the other,
  each from scratch (four passes, two Grams per client), for comparison.
* ``inat_shaped``: the FedCOF server alone on synthetic client statistics shaped like iNat-120K
  (9,275 clients, 1,203 classes, d = 1280, about 120k (client, class) means). Target: under 60 s and
  4 GB (the peak traced allocation is recorded in ``extra_info`` and asserted).

Run::

    python -m pytest tests/bench/test_bench_closed_form.py --benchmark-only -q
"""

from __future__ import annotations

import itertools
import tracemalloc

import numpy as np
import pytest

from benchmark.closed_form import paper_protocol_options, run_method, run_methods
from benchmark.closed_form.fedcof import FedCOFServer
from benchmark.closed_form.stats import ClassMeansMessage

pytestmark = pytest.mark.bench

D = 1280
FOUR = [
    ("fedncm", {}),
    ("fed3r_fedcof", {"lam": 0.01}),
    ("fed3r_official", {"lam": 0.01}),
    ("fedcof", {"gamma": 0.1}),
]


def _features(rng: np.random.Generator, labels: np.ndarray, centres: np.ndarray) -> np.ndarray:
    x = rng.standard_normal((len(labels), D), dtype=np.float32)
    x += centres[labels]
    return np.maximum(x, 0.0, out=x)  # post-ReLU-like features, as MobileNetV2's


@pytest.fixture(scope="module")
def cifar_shaped():
    rng = np.random.default_rng(0)
    num_classes, num_clients = 100, 100
    centres = rng.normal(0.0, 1.0, (num_classes, D)).astype(np.float32)
    y_train = np.repeat(np.arange(num_classes), 500)
    y_test = np.repeat(np.arange(num_classes), 100)
    x_train = _features(rng, y_train, centres)
    x_test = _features(rng, y_test, centres)
    owner = np.empty(len(y_train), dtype=np.int64)
    for c in range(num_classes):
        idx = np.flatnonzero(y_train == c)
        props = rng.dirichlet(np.full(num_clients, 0.1))
        owner[idx] = rng.choice(num_clients, size=len(idx), p=props)
    clients = [np.flatnonzero(owner == k) for k in range(num_clients)]
    return x_train, y_train, x_test, y_test, clients, num_classes


@pytest.mark.parametrize("solver", ["solve64", "pinv32"])
@pytest.mark.parametrize(("name", "opts"), [*FOUR, ("fedcof_oracle", {"gamma": 0.1})], ids=lambda v: str(v))
def test_bench_method(benchmark, machine_info, cifar_shaped, name, opts, solver):
    benchmark.group = f"closed_form 100 clients x 100 classes x d={D}"
    res = benchmark.pedantic(
        run_method, args=(name, *cifar_shaped), kwargs={**opts, "solver": solver}, rounds=2, iterations=1
    )
    benchmark.extra_info["accuracy"] = res.accuracy
    assert 0.0 <= res.accuracy <= 100.0


def _four(solver: str) -> dict[str, dict]:
    """The four methods' options: one solver for all, or ``"paper"``: the fedcof tables' reference options
    (float32 ``pinv`` servers, official Fed3R's float32 ``solve``; MobileNetV2's gamma = 0.1)."""
    if solver == "paper":
        return {name: paper_protocol_options(name, model_name="mobilenet_v2") for name, _ in FOUR}
    return {name: {**opts, "solver": solver} for name, opts in FOUR}


SOLVER_SETS = ["solve64", "pinv32", "paper"]


@pytest.mark.parametrize("solver", SOLVER_SETS)
def test_bench_all_four(benchmark, machine_info, cifar_shaped, solver):
    """FedNCM + Fed3R (fedcof) + Fed3R (official) + FedCOF, one after the other, each from scratch."""
    benchmark.group = f"closed_form 100 clients x 100 classes x d={D}"
    methods = _four(solver)

    def all_four():
        return [run_method(name, *cifar_shaped, **opts).accuracy for name, opts in methods.items()]

    accs = benchmark.pedantic(all_four, rounds=3, iterations=1)
    benchmark.extra_info.update({name: acc for (name, _), acc in zip(FOUR, accs, strict=True)})


@pytest.mark.parametrize("solver", SOLVER_SETS)
def test_bench_all_four_joint(benchmark, machine_info, cifar_shaped, solver):
    """The four methods through ``run_methods`` (shared client moments, as ``closed_form_step``): the target."""
    benchmark.group = f"closed_form 100 clients x 100 classes x d={D}"
    methods = _four(solver)

    def all_four():
        return run_methods(methods, *cifar_shaped)

    res = benchmark.pedantic(all_four, rounds=3, iterations=1)
    benchmark.extra_info.update({name: r.accuracy for name, r in res.items()})
    solo = {name: run_method(name, *cifar_shaped, **opts) for name, opts in methods.items()}
    for name, r in res.items():  # same heads as running each method alone
        np.testing.assert_array_equal(r.head.W, solo[name].head.W)


@pytest.fixture(scope="module")
def inat_shaped():
    """Synthetic FedCOF messages: 9,275 clients, 1,203 classes, ~120k (client, class) means of d = 1280."""
    rng = np.random.default_rng(1)
    num_clients, num_classes = 9275, 1203
    per_client = np.minimum(1 + rng.poisson(12.0, num_clients), num_classes)
    total = int(per_client.sum())
    centres = rng.normal(0.0, 1.0, (num_classes, D)).astype(np.float32)
    classes = np.concatenate([rng.choice(num_classes, m, replace=False) for m in per_client])
    counts = (1 + rng.poisson(1.0, total)).astype(np.float64)
    means = rng.standard_normal((total, D), dtype=np.float32)
    means /= np.sqrt(counts, dtype=np.float32)[:, None]
    means += centres[classes]
    starts = np.concatenate(([0], np.cumsum(per_client)))
    msgs = [
        ClassMeansMessage(k, classes[s:e], means[s:e], counts[s:e])
        for k, (s, e) in enumerate(itertools.pairwise(starts))
    ]
    return msgs, num_classes, total


@pytest.mark.parametrize("solver", ["solve64", "pinv32"])
def test_bench_fedcof_server_inat_shaped(benchmark, machine_info, inat_shaped, solver):
    msgs, num_classes, total = inat_shaped
    benchmark.group = f"fedcof server, iNat-120K shaped ({len(msgs)} clients, {total} means, d={D})"

    def serve():
        server = FedCOFServer(num_classes, D, gamma=0.1, solver=solver)
        for m in msgs:
            server.add(m)
        return server.head()

    tracemalloc.start()
    head = serve()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    benchmark.extra_info["peak_traced_mib"] = peak / 2**20
    benchmark.extra_info["means"] = total
    assert np.all(np.isfinite(head.W))
    assert peak < 4 * 2**30, f"peak traced allocation {peak / 2**30:.2f} GiB exceeds the 4 GB target"
    benchmark.pedantic(serve, rounds=2, iterations=1)
