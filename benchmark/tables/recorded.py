"""What a plan says about the ledger of recorded runs (issue 24): the jobs of a cell filled from a record and the
stale records matching its jobs, as :class:`~benchmark.tables.plan.CellPlan` holds them and plan files store
them. Applying the ledger to a plan is :mod:`benchmark.tables.records`; these values live apart so that the
plan can hold them without importing the module that re-plans it (issue 25: no import circle)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchmark.ledger import LEDGER_DIR, RunRecord, short_machine


@dataclass(frozen=True)
class RecordedJob:
    """A job of a cell filled from a record of the ledger (plan files: ``recorded``)."""

    job: str  # the job's output path
    record: str  # the record's folder (``runs/<kind>/<id>``)
    date: str  # when the run ended (YYYY-MM-DD)
    machine: str  # :func:`benchmark.ledger.short_machine` of the run's machine
    commit: str  # the code commit that ran
    notes: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()  # shown with the verdict

    def label(self) -> str:
        """``recorded <date> on <machine>, commit <sha8>[; caveat ...]`` (as
        :meth:`benchmark.ledger.RunRecord.label`)."""
        return f"recorded {self.date} on {self.machine}, commit {self.commit[:8]}" + "".join(
            f"; {c}" for c in self.caveats
        )

    def to_dict(self) -> dict[str, Any]:
        out = {**dataclasses.asdict(self), "notes": list(self.notes), "caveats": list(self.caveats)}
        if not self.caveats:  # plans without caveats keep their content (and name)
            del out["caveats"]
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RecordedJob:
        return cls(
            **{**raw, "notes": tuple(raw.get("notes") or ()), "caveats": tuple(raw.get("caveats") or ())}
        )

    @classmethod
    def of(cls, record: RunRecord) -> RecordedJob:
        p = record.provenance
        return cls(record.job.path, ledger_name(record), p.date, short_machine(p.machine), p.code_commit, p.notes,
                   p.caveats)  # fmt: skip


@dataclass(frozen=True)
class StaleRecord:
    """A record matching a job of a cell whose runner numerics changed since: shown, never used nor counted."""

    job: str
    record: str
    label: str  # :meth:`benchmark.ledger.RunRecord.label` (names the numerics versions)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StaleRecord:
        return cls(**raw)


def ledger_name(record: RunRecord) -> str:
    """The record's folder as the checkout names it (``runs/<kind>/<id>``), wherever the ledger is: plans, tables
    and checks never hold a machine's absolute folders."""
    return str(LEDGER_DIR / record.job.KIND / record.id)
