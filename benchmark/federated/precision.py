"""One precision policy for the training families (issue 25: "one device and precision policy").

The device is :func:`benchmark.devices.pick_device`'s (the one resolver). What a run computes in is one
:class:`Precision`: ``dtype``, the dtype of the weights and of the input batches (float32; float64 for the
portable pins), and ``autocast``, mixed precision (the forward pass under ``torch.autocast`` to bfloat16, the
loss from float32 logits), which is a CUDA feature: :meth:`Precision.on` drops it elsewhere, as it always was
(a CPU run of a ``bf16`` configuration computes in float32 and records ``amp: false``), with a warning.

The fields users type stay as they are; :func:`precision_from` maps each of them onto a :class:`Precision`, here
and nowhere else, and an unknown value is one :class:`~benchmark.errors.ConfigError` naming the field:

=====================  ==============================================================  ====================
field                  where it is typed                                               values
=====================  ==============================================================  ====================
``dtype``              fl's training protocols (YAML) and ``TrainRequest.dtype``;       ``float32``, ``float64``
                       pfl's ``PFLConfig.dtype`` (the runner's ``pfl_dtype`` knob)
``train_precision``    the workflow config (fl's training jobs; part of their paths)    ``fp32``, ``bf16``
``amp``                ``FLConfig.amp`` / ``TrainRequest.amp``                          ``False``, ``True``
=====================  ==============================================================  ====================

``bf16`` / ``amp=True`` is bfloat16 autocast. zo (bernier2024) has no such field: its models are built in
:data:`ZO_PRECISION` (float32). Where each family reads the policy: fl's ``ModelTrainer`` (autocast around
the forward pass; ``local_sgd``, ``evaluate_model``) and ``fl.jobs.run_training`` (the model's and the batches' dtype),
pfl's ``PFLTrainer`` / ``evaluate`` (model and batch dtype), zo's ``build_model``.
"""

from __future__ import annotations

import warnings
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace

import torch

from benchmark.federated.precision_values import check_value


@dataclass(frozen=True)
class Precision:
    """What a run computes in (module docstring): ``dtype`` of weights and batches, ``autocast`` the dtype of
    mixed-precision autocast (``None``: off)."""

    dtype: torch.dtype = torch.float32
    autocast: torch.dtype | None = None

    def on(self, device: torch.device | str, *, warn: bool = False) -> Precision:
        """This policy as it runs on ``device``: autocast is a CUDA feature, dropped elsewhere (with ``warn``, a
        warning says so: what the user asked for is not silently ignored)."""
        if self.autocast is not None and torch.device(device).type != "cuda":
            if warn:
                warnings.warn(
                    f"{str(self.autocast).removeprefix('torch.')} autocast is a CUDA feature: this run on {device} "
                    f"computes in {str(self.dtype).removeprefix('torch.')} (its record says amp: false)",
                    stacklevel=2,
                )
            return replace(self, autocast=None)
        return self

    @property
    def amp(self) -> bool:
        """Whether the forward pass runs under autocast (after :meth:`on`: whether it really does)."""
        return self.autocast is not None

    def autocast_context(self) -> AbstractContextManager:
        """The context of a forward pass: CUDA autocast to :attr:`autocast`, or nothing (use after :meth:`on`)."""
        if self.autocast is None:
            return nullcontext()
        return torch.autocast(device_type="cuda", dtype=self.autocast)

    def loss_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` as the loss takes them: float32 under autocast, as they are otherwise."""
        return logits.float() if self.autocast is not None else logits


#: The paper runs' precision: float32, no autocast (the default of every family).
FP32 = Precision()

#: Every field a user types, its values, and the policy each value means (module docstring); the values are
#: :data:`benchmark.federated.precision_values.VALUES` (checked there without torch; a test keeps both equal).
FIELDS: dict[str, dict[object, Precision]] = {
    "dtype": {"float32": FP32, "float64": Precision(torch.float64)},
    "train_precision": {"fp32": FP32, "bf16": Precision(autocast=torch.bfloat16)},
    "amp": {False: FP32, True: Precision(autocast=torch.bfloat16)},
}

#: bernier2024's zeroth-order runs: float32 models, no autocast.
ZO_PRECISION = FP32


def _value(field: str, value: object) -> Precision:
    """The policy ``value`` of ``field`` means (the value's type too: ``1`` is no ``amp`` value)."""
    check_value(field, value)
    return next(policy for typed, policy in FIELDS[field].items() if type(typed) is type(value) and typed == value)


def precision_from(
    *, dtype: str | None = None, train_precision: str | None = None, amp: bool | None = None
) -> Precision:
    """The one policy the given fields (``None``: not given) mean together: the dtype of ``dtype``, autocast when
    ``train_precision`` or ``amp`` asks for it. An unknown value is a :class:`ConfigError` naming its field."""
    given = {"dtype": dtype, "train_precision": train_precision, "amp": amp}
    parts = {k: _value(k, v) for k, v in given.items() if v is not None}
    autocast = next((p.autocast for p in parts.values() if p.autocast is not None), None)
    return Precision(parts["dtype"].dtype if "dtype" in parts else torch.float32, autocast)
