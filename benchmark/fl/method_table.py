"""The rows of :data:`~benchmark.fl.method_registry.FL_METHODS`: each training-based method of legate2023 §4
(the table of :mod:`benchmark.fl.methods`' docstring), the ``run_*`` function of :mod:`benchmark.fl.methods`
that runs it, the inputs it needs, and its centralised oracle.

Kept apart from the implementations so that registering imports no torch: :class:`~benchmark.fl.config.FLConfig`
checks ``method`` against these names, and the workflow builds configs when it plans jobs; the implementation
module (torch) is imported when a method runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchmark.fl.method_registry import MethodInputs, register_fl_method

if TYPE_CHECKING:
    from benchmark.fl.config import FLConfig
    from benchmark.fl.engine import RunResult


def _method(
    name: str, function: str, summary: str, *, needs: Sequence[str] = (), centralised: bool = False,
    oracle: str | None = None, **fixed: Any,
) -> None:  # fmt: skip
    """Register method ``name``, run by ``benchmark.fl.methods.<function>`` with ``fixed`` keyword arguments."""

    def run(cfg: FLConfig, inputs: MethodInputs) -> RunResult:
        from benchmark.fl import methods  # local: torch

        return methods.call_method(getattr(methods, function), cfg, inputs, fixed)

    register_fl_method(name, summary=summary, needs=needs, centralised=centralised, oracle=oracle)(run)


# One entry per method, in the order of benchmark.fl.methods' docstring table; run_method dispatches through it.
_MODEL, _HEAD, _POOL = ("model", "clients", "test"), ("closed_form",), ("features",)
_method("lp", "run_lp", "federated LP (legate2023 §4 (b))", oracle="lp_oracle")
_method("ft", "run_ft", "federated full fine-tuning (legate2023 §4 (c))", needs=_MODEL, oracle="ft_oracle")
_method("random", "run_random", "full training from a random init (legate2023 §4 (a))", needs=_MODEL)
_method("head_ft", "run_two_stage", "closed-form head, then FT (legate2023 §3.3)", needs=_HEAD, stage2="ft")
_method("head_lp", "run_two_stage", "closed-form head, then LP (fedcof Init_FT_LP)", needs=_HEAD, stage2="lp")
_method("lp_ft", "run_lp_then_ft", "LP for lp_stage_rounds, then FT (legate2023 Table 6)", needs=_MODEL)
_method(
    "lp_oracle", "centralised_lp_oracle", "centralised LP (legate2023 §4 (d))", needs=_POOL, centralised=True
)
_method(
    "ft_oracle", "centralised_ft_oracle", "centralised FT (legate2023 §4 (d))", needs=_MODEL, centralised=True
)
