"""The one-screen summary that ends every table run (``flb verdict <target>``, the Snakemake target rule).

It says what the run showed and what it could not: cells run / ``PASS`` / ``PASS*`` (a match only under a
named departure) / ``FAIL`` split into explained (listed in ``expected/known_findings.yaml``) and unexplained,
and the ``NOT RUN`` cells grouped by reason. Reasons are typed values (:mod:`benchmark.reasons`, issue 25)
made where a cell is planned or assembled and stored in the checks file's ``not_run`` field; :func:`reason_group`
folds them by kind into a few groups (no data for X, no weights for X, needs full-backbone training, input not
stated, ...) and says which command, if any, would fill a group; no reason's text is parsed. The summary ends
with the command for the largest group that a command can fill.

One vocabulary (issue 23): the counts line names the seven verdicts exactly as the tables and the checks
file do (``PASS``, ``PASS*``, ``SUBSTITUTE-PASS``, ``SUBSTITUTE-PASS*``, ``FAIL``, ``SUBSTITUTE-FAIL``,
``NOT RUN``), with the checks file's counts. Long reasons are shortened at a word boundary with an ellipsis
(:func:`shorten`), and the summary says where the full reasons are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchmark.reasons import NotRunReason, ReasonKind

#: Verdict strings (benchmark.verdict.Status values) in the order the summary prints them (the tables' order).
VERDICTS = ("PASS", "PASS*", "SUBSTITUTE-PASS", "SUBSTITUTE-PASS*", "FAIL", "SUBSTITUTE-FAIL", "NOT RUN")
_FAILS = ("FAIL", "SUBSTITUTE-FAIL")
NOT_RUN = "NOT RUN"
#: Width of a reason group's name in the summary.
GROUP_WIDTH = 90


def shorten(text: str, width: int) -> str:
    """``text`` on one line, cut at the last word boundary that fits ``width`` with an ellipsis (``…``) when
    longer; a single word longer than ``width`` is cut inside it."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    if " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut.rstrip(" ,;:(-") + "…"


@dataclass(frozen=True)
class ReasonGroup:
    """A group of NOT RUN reasons and the command that would fill it (``None``: no command here can)."""

    name: str
    command: str | None
    why_not: str = ""


def _run(target: str) -> str:
    return f"snakemake --cores all {target}"


def _data(r: NotRunReason, target: str) -> ReasonGroup:
    if r.command is not None:
        return ReasonGroup(f"no data for {r.missing}", f"{r.command} && {_run(target)}   # where there is network")
    return ReasonGroup(f"no data for {r.missing}", f"put {r.missing} under $FLB_DATA_ROOT (layout: README.md, Data), "
                       f"then {_run(target)} --config data_root=$FLB_DATA_ROOT")  # fmt: skip


def _weights(r: NotRunReason, target: str) -> ReasonGroup:
    substitute = r.kind is ReasonKind.MISSING_SUBSTITUTE  # the model has a substitute file, not in the folder
    return ReasonGroup(
        f"no weights for {r.missing}",
        ("point FLB_WEIGHTS_DIR (--config weights_dir=...) at its substitute's folder, or " if substitute else "")
        + f"put torchvision's {r.missing} checkpoint in the torch hub cache (or allow the download), "
        f"then {_run(target)}",
    )


#: Per kind of reason (:class:`benchmark.reasons.ReasonKind`): its group, from the typed reason and the target.
_GROUPS: dict[ReasonKind, Callable[[NotRunReason, str], ReasonGroup]] = {
    ReasonKind.MISSING_DATA: _data,
    ReasonKind.MISSING_WEIGHTS: _weights,
    ReasonKind.MISSING_SUBSTITUTE: _weights,
    ReasonKind.NEEDS_TRAINING: lambda r, t: ReasonGroup(
        f"needs {r.missing} (GPU; estimates in the table's reasons)",
        f"{_run(t)} --config device=cuda   # on a GPU machine, or with the slurm profile (docs/cluster.md)",
    ),
    ReasonKind.OUTSIDE_TIER: lambda r, t: ReasonGroup("outside the CI tier", f"{_run(t)} --config tier=full"),
    ReasonKind.INPUT_NOT_STATED: lambda r, t: ReasonGroup(
        f"input not stated ({r.missing})", None, "the paper has to state it; no run can"
    ),
    ReasonKind.NOT_IMPLEMENTED: lambda r, t: ReasonGroup("not implemented in this suite", None, "needs code, not a run"),
    ReasonKind.NO_RUNNER: lambda r, t: ReasonGroup(
        "no runner of this suite fills it", None, "the table's spec routes no runner to it (paper_tables/)"
    ),
    ReasonKind.NOT_A_RESULT: lambda r, t: ReasonGroup("not a result table", None, "nothing to reproduce"),
    ReasonKind.ILLEGIBLE: lambda r, t: ReasonGroup("paper value illegible", None, "see expected/"),
    ReasonKind.PROTOCOL_MISMATCH: lambda r, t: ReasonGroup(
        "the runner cannot take the cell's protocol", None, "see the table's reasons"
    ),
    ReasonKind.NOT_SELECTED: lambda r, t: ReasonGroup(
        f"not selected by cell_filter={r.missing!r}", None, "the build's cell_filter leaves it out"
    ),
    ReasonKind.NO_VALUE: lambda r, t: ReasonGroup("the runs produced no value", None, "see the table's reasons"),
}


def reason_group(reason: NotRunReason, target: str) -> ReasonGroup:
    """The group of a NOT RUN cell of ``target`` with the typed ``reason``, and the command that would fill
    it: chosen by the reason's kind, named by its missing item (no text is parsed; issue 25)."""
    return _GROUPS[reason.kind](reason, target)


def cell_group(cell: Mapping[str, Any], target: str) -> ReasonGroup:
    """The group of a NOT RUN cell of a checks file: from its typed ``not_run`` field; a cell of a checks file
    written before reasons were typed (no such field) is its own group, named by its text."""
    if cell.get("not_run") is not None:
        return reason_group(NotRunReason.from_dict(cell["not_run"]), target)
    text = shorten(str(cell.get("reason") or "no reason given"), 70)
    return ReasonGroup(text, None, f"an older checks file: rebuild it with {_run(target)} for typed reasons")


def _count(cells: Sequence[Mapping[str, Any]], verdicts: Sequence[str]) -> int:
    return sum(c["verdict"] in verdicts for c in cells)


def counts_line(cells: Sequence[Mapping[str, Any]]) -> str:
    """``PASS 0 | PASS* 1 | SUBSTITUTE-PASS 3 | ... | NOT RUN 15``: every verdict by the tables' name, with the
    counts of the checks file (a verdict outside the seven, if any, after them)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for c in cells:
        counts[str(c["verdict"])] = counts.get(str(c["verdict"]), 0) + 1
    return " | ".join(f"{k} {v}" for k, v in counts.items())


def _ours(c: Mapping[str, Any]) -> str:
    if c.get("ours_printed"):
        return str(c["ours_printed"])
    return f"{c['ours_mean']:.4g}" if c.get("ours_mean") is not None else "?"


def summary_lines(
    data: Mapping[str, Any],
    unexplained: Sequence[Mapping[str, Any]],
    stale: Sequence[str] = (),
    *,
    max_listed: int = 10,
) -> list[str]:
    """The summary of one checks file (``results/checks/<target>.json``).

    ``unexplained``: its failing cells that ``expected/known_findings.yaml`` does not explain (from
    :func:`benchmark.tables.gate.split_failures`); ``stale``: findings of this target that no longer occur.
    """
    target, cells = str(data["target"]), list(data["cells"])
    not_run = [c for c in cells if c["verdict"] == NOT_RUN]
    n_fail = _count(cells, _FAILS)
    recorded = sum(c.get("provenance") == "recorded" for c in cells)
    run = len(cells) - len(not_run)
    lines = [
        f"== {target} (tier {data.get('tier', '?')}): {len(cells)} cells, {run} run"
        + (f" ({recorded} from recorded runs, runs/)" if recorded else "") + " ==",
        f"  {counts_line(cells)}",
    ]
    if n_fail:
        lines.append(f"  FAIL + SUBSTITUTE-FAIL {n_fail}: {n_fail - len(unexplained)} explained in "
                     f"expected/known_findings.yaml, {len(unexplained)} unexplained")  # fmt: skip
    if _count(cells, ("PASS*", "SUBSTITUTE-PASS*")) or _count(cells, ("SUBSTITUTE-PASS", "SUBSTITUTE-FAIL")):
        lines.append("  (PASS*: a match only under a named departure; SUBSTITUTE-*: run with substitute weights)")
    groups: Counter[ReasonGroup] = Counter(cell_group(c, target) for c in not_run)
    if groups:
        lines.append(f"  NOT RUN by reason (every reason in full: results/tables/{target}.md):")
        ranked = groups.most_common()
        for g, n in ranked[:max_listed]:
            lines.append(f"    {n:>5}  {shorten(g.name, GROUP_WIDTH)}")
        if len(ranked) > max_listed:
            lines.append(
                f"    {sum(n for _, n in ranked[max_listed:]):>5}  ({len(ranked) - max_listed} more groups)"
            )
        largest, n = ranked[0]
        fillable = [(g, k) for g, k in ranked if g.command]
        if largest.command is None:
            lines.append(f"  largest group ({shorten(largest.name, GROUP_WIDTH)}, {n}): no command fills it "
                         f"({largest.why_not})")  # fmt: skip
        if fillable:
            g, k = fillable[0]
            lines.append(f"  to fill {'it' if g == largest else f'{shorten(g.name, GROUP_WIDTH)} ({k})'}: {g.command}")
    for c in unexplained[:max_listed]:
        lines.append(
            f"  unexplained {c['verdict']}: {c['key']}  ours {_ours(c)} vs paper {c.get('printed', '?')}"
        )
    if len(unexplained) > max_listed:
        lines.append(f"  ... and {len(unexplained) - max_listed} more: results/tables/{target}.md")
    for s in stale:
        lines.append(f"  note: {s}")
    return lines
