"""Side-by-side comparison of this suite's runner with a paper's released code on one configuration (issue 26).

A comparison holds, per seed, what each side printed (:class:`SideRun`: the accuracy before training, the
per-round curve, the value the paper's table would report, named extras such as FedBABU's personalised
accuracy), the components known to differ (:class:`Difference`) and the **agreement rule** it is judged by
(:class:`AgreementRule`):

* ``identical``: where both computations are deterministic on the same inputs, every compared value of the
  same seed agrees within ``atol`` accuracy points (``atol = 0``: bit for bit);
* ``seed_spread``: otherwise the seed means of each quantity agree within
  ``max(floor, k * sqrt(s_o**2 / n_o + s_t**2 / n_t))`` (``s``: the sample standard deviation over seeds,
  ``n``: seeds per side; ``k = 2`` is a two-standard-error band). With fewer than two seeds on a side the
  spread is unknown: a difference beyond ``floor`` is then UNDECIDED, never AGREE.

:meth:`PeerComparison.outcome` applies the rule to every quantity both sides report (initial, final, each
named extra, each round both evaluated) and says AGREE, DISAGREE or UNDECIDED with one line per quantity.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmark.errors import ConfigError

SIDES = ("ours", "theirs")
RULE_KINDS = ("identical", "seed_spread")


@dataclass(frozen=True)
class SideRun:
    """One run of one side (``ours`` or ``theirs``) at one seed; accuracies in % (or ``metric``)."""

    side: str
    seed: int
    rounds: tuple[int, ...]
    accuracy: tuple[float, ...]
    final: float
    initial: float | None = None
    extra: Mapping[str, float] = field(default_factory=dict)
    wall_s: float = 0.0
    command: str = ""
    notes: tuple[str, ...] = ()
    metric: str = "accuracy"

    def __post_init__(self) -> None:
        if self.side not in SIDES:
            raise ConfigError(f"SideRun.side is {self.side!r}", f"use one of {', '.join(SIDES)}")
        if len(self.rounds) != len(self.accuracy):
            raise ConfigError(
                f"SideRun ({self.side}, seed {self.seed}): {len(self.rounds)} rounds but {len(self.accuracy)} "
                "accuracies",
                "give one accuracy per evaluated round",
            )

    def quantities(self) -> dict[str, float]:
        """Every compared quantity of this run by name: ``initial``, ``final``, ``extra:<name>``,
        ``round <r>``."""
        out: dict[str, float] = {"final": float(self.final)}
        if self.initial is not None:
            out["initial"] = float(self.initial)
        out.update({f"extra:{k}": float(v) for k, v in self.extra.items()})
        out.update({f"round {r}": float(a) for r, a in zip(self.rounds, self.accuracy, strict=False)})
        return out

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SideRun:
        return cls(**{**raw, "rounds": tuple(raw["rounds"]), "accuracy": tuple(raw["accuracy"]),
                      "notes": tuple(raw.get("notes", ())), "extra": dict(raw.get("extra", {}))})  # fmt: skip


@dataclass(frozen=True)
class AgreementRule:
    """How two sides are judged equal (module docstring)."""

    kind: str
    atol: float = 0.0
    k: float = 2.0
    floor: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in RULE_KINDS:
            raise ConfigError(f"AgreementRule.kind is {self.kind!r}", f"use one of {', '.join(RULE_KINDS)}")
        if self.atol < 0 or self.k <= 0 or self.floor < 0:
            raise ConfigError(
                f"AgreementRule {self} has a negative tolerance", "use atol, floor >= 0 and k > 0"
            )

    def describe(self) -> str:
        if self.kind == "identical":
            exact = "bit for bit" if self.atol == 0 else f"within {self.atol:g} points"
            return f"identical: every value of the same seed equal {exact}"
        return (f"seed spread: |mean ours - mean theirs| <= max({self.floor:g}, {self.k:g} x sqrt(s_o^2/n_o + "
                "s_t^2/n_t)) over seeds; with < 2 seeds a side's spread is unknown (beyond the floor: UNDECIDED)")  # fmt: skip


@dataclass(frozen=True)
class Difference:
    """A component that differs between the released code and this suite on the compared configuration."""

    component: str
    theirs: str
    ours: str
    effect: str = ""


@dataclass(frozen=True)
class QuantityCheck:
    """The rule applied to one quantity."""

    quantity: str
    ours: float
    theirs: float
    tolerance: float | None  # None: undecidable (spread unknown)
    status: str  # AGREE | DISAGREE | UNDECIDED

    def line(self) -> str:
        diff = self.ours - self.theirs
        tol = "spread unknown" if self.tolerance is None else f"tol {self.tolerance:.4g}"
        return f"{self.quantity}: ours {self.ours:.4f}, theirs {self.theirs:.4f}, diff {diff:+.4f} ({tol}): {self.status}"


@dataclass(frozen=True)
class Outcome:
    """AGREE when every quantity agrees; DISAGREE when one does not; otherwise UNDECIDED."""

    status: str
    checks: tuple[QuantityCheck, ...]

    @property
    def lines(self) -> list[str]:
        return [c.line() for c in self.checks]


@dataclass(frozen=True)
class PeerComparison:
    """One comparison of this suite with a paper's released code (module docstring)."""

    family: str
    config_name: str
    config: Mapping[str, Any]
    seeds: tuple[int, ...]
    official_repo: str
    official_commit: str
    ours: tuple[SideRun, ...]
    theirs: tuple[SideRun, ...]
    rule: AgreementRule
    differences: tuple[Difference, ...] = ()
    notes: tuple[str, ...] = ()

    def outcome(self) -> Outcome:
        if not self.ours or not self.theirs:
            return Outcome("UNDECIDED", ())
        if self.rule.kind == "identical":
            checks = _identical(self.ours, self.theirs, self.rule.atol)
        else:
            checks = _seed_spread(self.ours, self.theirs, self.rule)
        if not checks:
            return Outcome("UNDECIDED", ())
        statuses = {c.status for c in checks}
        status = "DISAGREE" if "DISAGREE" in statuses else "UNDECIDED" if "UNDECIDED" in statuses else "AGREE"
        return Outcome(status, tuple(checks))

    def to_dict(self) -> dict[str, Any]:
        out = self.outcome()
        return {
            "family": self.family, "config_name": self.config_name, "config": dict(self.config),
            "seeds": list(self.seeds), "official_repo": self.official_repo,
            "official_commit": self.official_commit,
            "ours": [r.to_dict() for r in self.ours], "theirs": [r.to_dict() for r in self.theirs],
            "rule": asdict(self.rule), "rule_text": self.rule.describe(),
            "differences": [asdict(d) for d in self.differences], "notes": list(self.notes),
            "outcome": {"status": out.status, "checks": [asdict(c) for c in out.checks]},
        }  # fmt: skip

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> PeerComparison:
        return cls(
            family=raw["family"], config_name=raw["config_name"], config=dict(raw["config"]),
            seeds=tuple(raw["seeds"]), official_repo=raw["official_repo"],
            official_commit=raw["official_commit"],
            ours=tuple(SideRun.from_dict(r) for r in raw["ours"]),
            theirs=tuple(SideRun.from_dict(r) for r in raw["theirs"]),
            rule=AgreementRule(**raw["rule"]),
            differences=tuple(Difference(**d) for d in raw.get("differences", ())),
            notes=tuple(raw.get("notes", ())),
        )  # fmt: skip


def _by_seed(runs: Iterable[SideRun]) -> dict[int, SideRun]:
    out: dict[int, SideRun] = {}
    for r in runs:
        if r.seed in out:
            raise ConfigError(f"two {r.side} runs for seed {r.seed}", "give one run per side and seed")
        out[r.seed] = r
    return out


def _identical(ours: Iterable[SideRun], theirs: Iterable[SideRun], atol: float) -> list[QuantityCheck]:
    o, t = _by_seed(ours), _by_seed(theirs)
    checks = []
    for seed in sorted(set(o) & set(t)):
        qo, qt = o[seed].quantities(), t[seed].quantities()
        for name in _common(qo, qt):
            ok = abs(qo[name] - qt[name]) <= atol
            checks.append(QuantityCheck(f"seed {seed} {name}", qo[name], qt[name], atol,
                                        "AGREE" if ok else "DISAGREE"))  # fmt: skip
    return checks


def _seed_spread(
    ours: Iterable[SideRun], theirs: Iterable[SideRun], rule: AgreementRule
) -> list[QuantityCheck]:
    qo = [r.quantities() for r in _by_seed(ours).values()]
    qt = [r.quantities() for r in _by_seed(theirs).values()]
    names = _common(*([q for q in qo] + [q for q in qt]))
    checks = []
    for name in names:
        vo, vt = [q[name] for q in qo], [q[name] for q in qt]
        mo, mt = statistics.fmean(vo), statistics.fmean(vt)
        if len(vo) < 2 or len(vt) < 2:
            ok = abs(mo - mt) <= rule.floor
            checks.append(QuantityCheck(name, mo, mt, None, "AGREE" if ok else "UNDECIDED"))
            continue
        so, st = statistics.stdev(vo), statistics.stdev(vt)
        tol = max(rule.floor, rule.k * math.sqrt(so**2 / len(vo) + st**2 / len(vt)))
        checks.append(QuantityCheck(name, mo, mt, tol, "AGREE" if abs(mo - mt) <= tol else "DISAGREE"))
    return checks


def _common(*quantities: Mapping[str, float]) -> list[str]:
    """Names every mapping has, in a stable order: initial, final, extras, rounds by number."""
    names = set(quantities[0])
    for q in quantities[1:]:
        names &= set(q)

    def key(name: str) -> tuple[int, float, str]:
        if name == "initial":
            return (0, 0, name)
        if name == "final":
            return (1, 0, name)
        if name.startswith("extra:"):
            return (2, 0, name)
        return (3, float(name.split()[-1]), name)

    return sorted(names, key=key)


def render(comparison: PeerComparison) -> str:
    """The comparison as Markdown: configuration, both sides per seed, the rule, the outcome, the differences."""
    out = comparison.outcome()
    lines = [f"# Peer comparison: {comparison.family}, config `{comparison.config_name}`", "",
             f"Released code: {comparison.official_repo} at `{comparison.official_commit}`", "",
             "| key | value |", "|---|---|"]  # fmt: skip
    lines += [f"| {k} | {v} |" for k, v in sorted(comparison.config.items())]
    lines += [
        "",
        "| side | seed | initial | final | extras | rounds evaluated | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in (*comparison.ours, *comparison.theirs):
        init = "" if r.initial is None else f"{r.initial:.2f}"
        extras = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.extra.items()))
        lines.append(
            f"| {r.side} | {r.seed} | {init} | {r.final:.2f} | {extras} | {len(r.rounds)} | {r.wall_s:.0f} |"
        )
    lines += ["", f"Rule: {comparison.rule.describe()}", "", f"**Outcome: {out.status}**", ""]
    lines += [f"- {line}" for line in out.lines]
    if comparison.differences:
        lines += ["", "| component | released code | this suite | effect |", "|---|---|---|---|"]
        lines += [f"| {d.component} | {d.theirs} | {d.ours} | {d.effect} |" for d in comparison.differences]
    if comparison.notes:
        lines += ["", *[f"- {n}" for n in comparison.notes]]
    return "\n".join(lines) + "\n"
