"""Closed-form (training-free) heads on cached features: FedNCM, Fed3R, FedCOF, FedCOF oracle.

Each method is a client statistic (:mod:`.stats`, the message actually sent) plus a server that turns the
messages into a :class:`~.heads.LinearHead`. Entry point for the workflow::

    from benchmark.closed_form import run_method
    res = run_method("fedcof", f_train, y_train, f_test, y_test, clients, num_classes,
                     gamma=1.0, solver="pinv32")
    res.accuracy  # percent

Methods are looked up by name (:func:`list_methods`, :func:`get_method`); :func:`paper_protocol_options`
gives the reference-code options of a paper's tables. Modules: :mod:`.heads` (head, solvers),
:mod:`.stats` (client messages), :mod:`.fedncm`, :mod:`.fed3r`, :mod:`.fedcof`, :mod:`.centralised`,
:mod:`.registry`, :mod:`.protocols` (run protocols and the papers' options).
"""

from __future__ import annotations

# The method modules register themselves when imported; this order is the registration order, which is the
# order runs compute the methods in (closed_form.registry.suite_methods).
# isort: off
from benchmark.closed_form.fedncm import fedncm
from benchmark.closed_form.fed3r import fed3r_fedcof, fed3r_official
from benchmark.closed_form.fedcof import default_gamma, fedcof, fedcof_oracle
from benchmark.closed_form.centralised import ncm_head, ridge_head, within_class_head

# isort: on
from benchmark.closed_form.heads import SOLVERS, LinearHead, evaluate
from benchmark.closed_form.protocols import paper_protocol_options
from benchmark.closed_form.registry import (
    MethodResult,
    get_method,
    list_methods,
    participation_schedule,
    register_method,
    run_method,
    run_methods,
)
from benchmark.closed_form.stats import CountNoise

__all__ = [
    "SOLVERS",
    "CountNoise",
    "LinearHead",
    "MethodResult",
    "default_gamma",
    "evaluate",
    "fed3r_fedcof",
    "fed3r_official",
    "fedcof",
    "fedcof_oracle",
    "fedncm",
    "get_method",
    "list_methods",
    "ncm_head",
    "paper_protocol_options",
    "participation_schedule",
    "register_method",
    "ridge_head",
    "run_method",
    "run_methods",
    "within_class_head",
]
