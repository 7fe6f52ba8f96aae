"""The shared pieces of the fl layer (issue 25: each thing once): the method table's entries
(:func:`benchmark.fl.method_table._method`) and the protocol lookup both training runners share
(:class:`benchmark.runners._features.ProtocolRunner`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmark.errors import ConfigError
from benchmark.fl import method_table, methods
from benchmark.fl.config import FLConfig
from benchmark.fl.method_registry import FL_METHODS
from benchmark.reasons import ReasonKind
from benchmark.runners import get_runner


def test_a_method_entry_gets_exactly_the_inputs_its_function_names(monkeypatch) -> None:
    """An entry calls its function with ``cfg``, the MethodInputs fields it has parameters for (W and b of the
    closed form as ``weight`` / ``bias``) and the entry's fixed keywords; nothing else."""
    seen: dict[str, object] = {}

    def fake(cfg, weight, bias, *, model=None, features=None, checkpoint=None, stage2=None, head=None):
        seen.update(cfg=cfg, weight=weight, bias=bias, model=model, features=features, checkpoint=checkpoint,
                    stage2=stage2, head=head)  # fmt: skip
        return "ran"

    monkeypatch.setattr(methods, "run_dummy_entry", fake, raising=False)  # a row names a function of fl.methods
    method_table._method("dummy_entry", "run_dummy_entry", "test only", needs=("closed_form",), stage2="ft")
    try:
        cfg = FLConfig(method="dummy_entry", progress=False)
        given = {"model": "M", "clients": "C", "test": "T", "features": "F", "closed_form": ("W", "b")}
        assert methods.run_method(cfg, **given, checkpoint="K") == "ran"
        assert seen == {"cfg": cfg, "weight": "W", "bias": "b", "model": "M", "features": "F", "checkpoint": "K",
                        "stage2": "ft", "head": None}  # fmt: skip
        with pytest.raises(ConfigError, match="this method needs closed_form"):
            methods.run_method(cfg, model="M")
    finally:
        FL_METHODS.remove("dummy_entry")


def _plan(protocols: dict[str, str], dataset: str, model: str, image_size: int | None = None):
    cell = SimpleNamespace(protocol={"image_size": image_size})
    return SimpleNamespace(params={"protocols": protocols}, dataset=dataset, model=model, cell=cell, not_run=None)


@pytest.mark.parametrize(
    ("runner", "name", "catalogue"),
    [
        ("lp_features", "legate2023_cifar10", "benchmark/fl/protocols.py"),
        ("fl_train", "legate2023_cifar10", "benchmark/protocols/fl_train.yaml"),
    ],
)
def test_both_training_runners_look_up_a_cells_protocol_the_same_way(runner: str, name: str, catalogue: str) -> None:
    r = get_runner(runner)
    rule = SimpleNamespace(params={"protocols": {"cifar10@32": name}})
    assert r.runner_protocol(None, SimpleNamespace(protocol={"image_size": 32}), rule, "cifar10") == {
        "clients": 100, "per_class": None, "participation": 0.3,
    }  # fmt: skip
    assert r.runner_protocol(None, SimpleNamespace(protocol={}), rule, "cifar10") is None  # no size: key cifar10
    plan = r.plan(None, rule, _plan({"cifar10@32": name}, "cifar10", "squeezenet1_1"), {})
    assert plan.not_run.kind == ReasonKind.NOT_IMPLEMENTED
    assert plan.not_run.render() == f"no training protocol for cifar10 in this spec ({catalogue})"
    plan = r.plan(None, rule, _plan({"cifar10@32": name}, "cifar10", "resnet18", 32), {})
    assert plan.not_run.kind == ReasonKind.PROTOCOL_MISMATCH
    assert plan.not_run.render() == f"protocol {name} is for cifar10 x squeezenet1_1, not cifar10 x resnet18"
