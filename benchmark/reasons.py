"""Why a cell is NOT RUN: a typed value, rendered once (issue 25).

A reason is made where a cell is planned or assembled (:mod:`benchmark.tables.plan`, the runners' ``plan``
and ``collect``, :mod:`benchmark.tables.availability`, the cost models of
:mod:`benchmark.tables.cost_runner`, the verdict of an illegible cell) as a :class:`NotRunReason`: its
:class:`ReasonKind`, the item that is missing, the statement, and how it is filled (the fix and, where one
exists, the exact command). :meth:`NotRunReason.render` is the one place its text is made: the tables, the
checks JSON's ``reason``, the tidy rows and the report pages show that text. The plan file and the checks
JSON also store the typed fields (:meth:`NotRunReason.to_dict`), which the one-screen summary
(:mod:`benchmark.tables.summary`) and the report guard read back by kind; nothing parses the text.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from benchmark.errors import ConfigError, UnknownNameError


class ReasonKind(StrEnum):
    """The kinds of NOT RUN reason (the value is what the plan and checks files store)."""

    #: The dataset's files are not under the data root (a download or a copy fills it).
    MISSING_DATA = "missing data"
    #: Neither the papers' checkpoint nor a substitute file exists for the model.
    MISSING_WEIGHTS = "missing weights"
    #: The model has a substitute weights file, but it is not in the weights folder.
    MISSING_SUBSTITUTE = "missing substitute"
    #: Training this machine does not run by default (a GPU, or ``cpu_training=true``).
    NEEDS_TRAINING = "needs training"
    #: The cell is left out of the CI tier (``--config tier=full`` runs it).
    OUTSIDE_TIER = "outside tier"
    #: The paper does not state an input the cell needs (no run can fill it).
    INPUT_NOT_STATED = "input not stated"
    #: The suite has no code for the cell's method, setting, dataset or model.
    NOT_IMPLEMENTED = "not implemented"
    #: The table's spec routes no runner to the cell.
    NO_RUNNER = "no runner"
    #: The table states a protocol or describes data: nothing to reproduce.
    NOT_A_RESULT = "not a result"
    #: The paper's printed value is illegible or absent.
    ILLEGIBLE = "illegible"
    #: The runner cannot take the protocol the cell states.
    PROTOCOL_MISMATCH = "protocol mismatch"
    #: The build's ``cell_filter`` leaves the cell out.
    NOT_SELECTED = "not selected"
    #: The cell's runs produced no value.
    NO_VALUE = "no value"


def reason_kind(value: Any) -> ReasonKind:
    """``value`` as a :class:`ReasonKind`; an unknown kind is an :class:`UnknownNameError` naming the valid ones."""
    try:
        return ReasonKind(value)
    except ValueError:
        raise UnknownNameError(
            f"unknown NOT RUN reason kind {value!r}", f"use one of: {', '.join(k.value for k in ReasonKind)}"
        ) from None


def _text(value: Any, field: str, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"NOT RUN reason field {field!r} must be a non-empty string, got {value!r}",
                          "say what is missing and why")  # fmt: skip


@dataclass(frozen=True)
class NotRunReason:
    """Why one cell is NOT RUN (module docstring).

    ``kind``: a :class:`ReasonKind` (its value is accepted too; any other is an error). ``missing``: the item
    that is missing (a dataset, a model, the unstated input, the training run, the filter ...), what the
    summary groups by. ``detail``: the statement. ``fix``: how to fill the cell, in words, or ``None`` when
    nothing here can; ``command``: the exact command inside ``fix`` (e.g. ``flb data fetch cifar100``), when
    one fills it. ``notes``: clauses added after the fix (e.g. a stale record of the ledger).
    """

    kind: ReasonKind
    missing: str
    detail: str
    fix: str | None = None
    command: str | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", reason_kind(self.kind))
        object.__setattr__(self, "notes", tuple(self.notes))
        _text(self.missing, "missing")
        _text(self.detail, "detail")
        _text(self.fix, "fix", optional=True)
        _text(self.command, "command", optional=True)
        for note in self.notes:
            _text(note, "notes")
        if self.command is not None and (self.fix is None or self.command not in self.fix):
            raise ConfigError(f"NOT RUN reason command {self.command!r} is not in its fix {self.fix!r}",
                              "the fix states the command it names")  # fmt: skip

    def render(self) -> str:
        """The reason's text, as every table, checks file and page shows it: the statement, then the fix and
        the notes, joined by ``; ``."""
        return "; ".join((self.detail, *((self.fix,) if self.fix else ()), *self.notes))

    def with_note(self, note: str) -> NotRunReason:
        """This reason with ``note`` added after its fix (and its earlier notes)."""
        return dataclasses.replace(self, notes=(*self.notes, note))

    def to_dict(self) -> dict[str, Any]:
        """The typed fields as the plan and checks files store them (:meth:`from_dict` reads them back)."""
        return {"kind": self.kind.value, "missing": self.missing, "detail": self.detail, "fix": self.fix,
                "command": self.command, "notes": list(self.notes)}  # fmt: skip

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> NotRunReason:
        """The reason :meth:`to_dict` wrote; a missing or unknown field is a :class:`ConfigError`."""
        if not isinstance(raw, Mapping) or not {"kind", "missing", "detail"} <= set(raw):
            raise ConfigError(f"not a NOT RUN reason: {raw!r}", "it needs kind, missing and detail")
        unknown = set(raw) - {"kind", "missing", "detail", "fix", "command", "notes"}
        if unknown:
            raise ConfigError(f"NOT RUN reason {raw!r} has unknown fields {sorted(unknown)}",
                              "write kind, missing, detail and optionally fix, command, notes")  # fmt: skip
        return cls(reason_kind(raw["kind"]), raw["missing"], raw["detail"], raw.get("fix"), raw.get("command"),
                   tuple(raw.get("notes") or ()))  # fmt: skip


def reason_from_json(raw: Mapping[str, Any] | None) -> NotRunReason | None:
    """:meth:`NotRunReason.from_dict` of a stored field, ``None`` for ``null``."""
    return None if raw is None else NotRunReason.from_dict(raw)


#: How a training cell this machine does not train is filled (the fl_train and pfl runners' fix).
TRAIN_ON_GPU = "run with --config device=cuda or the slurm profile (or cpu_training=true to train on this CPU)"


def needs_training(
    missing: str, detail: str, fix: str = TRAIN_ON_GPU, command: str = "--config device=cuda"
) -> NotRunReason:
    """A cell whose ``missing`` training run this machine does not run by default (``detail`` says which and
    how long): ``<detail>; run with --config device=cuda ...``."""
    return NotRunReason(ReasonKind.NEEDS_TRAINING, missing, detail, fix=fix, command=command)


def outside_ci_tier(what: str, why: str) -> NotRunReason:
    """``outside the CI tier (<what>: <why>); runs with --config tier=full``: a cell the CI tier leaves out."""
    return NotRunReason(ReasonKind.OUTSIDE_TIER, what, f"outside the CI tier ({what}: {why})",
                        fix="runs with --config tier=full", command="--config tier=full")  # fmt: skip


def not_implemented_method(method: Any, by: str) -> NotRunReason:
    """``method 'x' is not implemented by <by>``: a cell whose method the runner has no code for."""
    return NotRunReason(ReasonKind.NOT_IMPLEMENTED, f"method {method!r}", f"method {method!r} is not implemented by {by}")
