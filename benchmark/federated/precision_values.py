"""The values a user may type for a run's precision, field by field (the table of
:mod:`benchmark.federated.precision`, which maps each value onto a policy). No torch here: a workflow checks a
typed value when it plans the run, and importing torch costs seconds per Snakemake start."""

from __future__ import annotations

from benchmark.errors import ConfigError

#: Every precision field a user types and its values (each value's type matters: ``1`` is no ``amp`` value).
VALUES: dict[str, tuple[object, ...]] = {
    "dtype": ("float32", "float64"),
    "train_precision": ("fp32", "bf16"),
    "amp": (False, True),
}


def check_value(field: str, value: object) -> object:
    """``value`` when it is one of ``field``'s :data:`VALUES` (type included); else one :class:`ConfigError`
    naming the field and the values it takes."""
    if any(type(typed) is type(value) and typed == value for typed in VALUES[field]):
        return value
    raise ConfigError(
        f"{field}={value!r} is not a precision", f"use one of: {', '.join(repr(v) for v in VALUES[field])}"
    )
