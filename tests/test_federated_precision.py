"""The one precision policy (benchmark/federated/precision.py, issue 25): every field a user types maps onto one
Precision in one place, an unknown value is one ConfigError naming the field, autocast is CUDA-only, and the
three families read it (fl's jobs and trainer, pfl's config, zo's encoder dtype)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from benchmark.errors import ConfigError
from benchmark.federated.precision import FP32, ZO_PRECISION, Precision, precision_from
from benchmark.fl.train_protocols import get_train_protocol
from benchmark.pfl.trainer import PFLConfig
from benchmark.runners.fl_train import FLTrainJob

BF16 = Precision(autocast=torch.bfloat16)


@pytest.mark.parametrize(
    ("fields", "want"),
    [
        ({}, FP32),
        ({"dtype": "float32"}, FP32),
        ({"dtype": "float64"}, Precision(torch.float64)),
        ({"train_precision": "fp32"}, FP32),
        ({"train_precision": "bf16"}, BF16),
        ({"amp": False}, FP32),
        ({"amp": True}, BF16),
        ({"dtype": "float64", "amp": True}, Precision(torch.float64, torch.bfloat16)),
    ],
)
def test_every_typed_value_means_one_policy(fields, want) -> None:
    assert precision_from(**fields) == want


@pytest.mark.parametrize(
    ("fields", "name"),
    [({"dtype": "float16"}, "dtype"), ({"dtype": "fp32"}, "dtype"), ({"train_precision": "fp16"}, "train_precision"),
     ({"train_precision": "float32"}, "train_precision"), ({"amp": 1}, "amp"), ({"amp": "yes"}, "amp")],
)  # fmt: skip
def test_an_unknown_value_is_one_error_naming_its_field(fields, name) -> None:
    with pytest.raises(ConfigError, match=rf"^{name}=.* is not a precision"):
        precision_from(**fields)


def test_autocast_is_a_cuda_feature_and_the_loss_takes_float32_logits_under_it() -> None:
    assert BF16.on("cpu") == FP32 and not BF16.on(torch.device("cpu")).amp
    with pytest.warns(UserWarning, match="bfloat16 autocast is a CUDA feature: this run on cpu computes in"):
        assert BF16.on("cpu", warn=True) == FP32
    assert BF16.on("cuda:0") is BF16 and BF16.on("cuda").amp
    assert Precision(torch.float64, torch.bfloat16).on("cpu") == Precision(torch.float64)
    logits = torch.ones(2, 3, dtype=torch.bfloat16)
    assert BF16.loss_logits(logits).dtype == torch.float32
    x64 = torch.ones(2, dtype=torch.float64)
    assert FP32.loss_logits(x64) is x64 and Precision(torch.float64).loss_logits(x64) is x64
    with FP32.autocast_context():
        assert not torch.is_autocast_enabled()


def test_the_families_read_the_policy() -> None:
    """fl: a training protocol's dtype and a job's train_precision; pfl: PFLConfig.dtype; zo: float32."""
    proto = get_train_protocol("legate2023_cifar10")
    assert proto.precision == FP32
    assert dataclasses.replace(proto, dtype="float64").precision == Precision(torch.float64)
    with pytest.raises(ConfigError, match="dtype"):
        _ = dataclasses.replace(proto, dtype="half").precision
    assert PFLConfig(dtype="float64").precision.dtype == torch.float64 and PFLConfig().precision == FP32
    with pytest.raises(ConfigError, match=r"^dtype='bfloat16'"):
        PFLConfig(dtype="bfloat16")
    assert ZO_PRECISION == FP32
    job = FLTrainJob(
        dataset="cifar10", model="squeezenet1_1", weights="substitute", preprocess="legate2023_cifar",
        subset="all", protocol="legate2023_cifar10", algorithm="fedavg", method="ft", train_precision="bf16",
        ptag="dirichlet-alpha0.1-num_clients100", lr_from="tuned", seed=0,
    )  # fmt: skip
    assert job._request({}, seed=0).amp is True
    assert dataclasses.replace(job, train_precision="fp32")._request({}, seed=0).amp is False
    with pytest.raises(ConfigError, match=r"^train_precision='fp16'"):  # was silently fp32
        dataclasses.replace(job, train_precision="fp16")._request({}, seed=0)


def test_the_values_checked_without_torch_are_the_policy_tables() -> None:
    """Planning checks a typed value against precision_values.VALUES (no torch); each field's values there must be
    exactly the keys of the policy table, type included (a value added to one and not the other fails here)."""
    from benchmark.federated.precision import FIELDS
    from benchmark.federated.precision_values import VALUES

    assert set(VALUES) == set(FIELDS)
    for field, values in VALUES.items():
        assert [(type(v), v) for v in values] == [(type(k), k) for k in FIELDS[field]], field
