"""The one-screen summary that ends every table run (``flb verdict <target>``, the Snakemake target rule).

It says what the run showed and what it could not: cells run / ``PASS`` / ``PASS*`` (a match only under a
named departure) / ``FAIL`` split into explained (listed in ``expected/known_findings.yaml``) and unexplained,
and the ``NOT RUN`` cells grouped by reason. Reasons are free text written where a cell is planned
(:mod:`benchmark.tables.plan`, :mod:`benchmark.tables.cost_runner`); :func:`reason_group` folds them into a
few groups (no data for X, no weights for X, needs full-backbone training, input not stated, ...) and says
which command, if any, would fill a group. The summary ends with the command for the largest group that a
command can fill.

One vocabulary (issue 23): the counts line names the seven verdicts exactly as the tables and the checks
file do (``PASS``, ``PASS*``, ``SUBSTITUTE-PASS``, ``SUBSTITUTE-PASS*``, ``FAIL``, ``SUBSTITUTE-FAIL``,
``NOT RUN``), with the checks file's counts. Long reasons are shortened at a word boundary with an ellipsis
(:func:`shorten`), and the summary says where the full reasons are.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def reason_group(reason: str | None, target: str) -> ReasonGroup:
    """The group of a NOT RUN ``reason`` of ``target``'s cell, with the command that would fill it."""
    text = " ".join((reason or "").split())
    run = f"snakemake --cores all {target}"
    if "input not stated: " in text:
        what = re.split(r" \(|;", text.split("input not stated: ", 1)[1], maxsplit=1)[0].strip(" .")
        return ReasonGroup(f"input not stated ({what})", None, "the paper has to state it; no run can")
    if m := re.search(r"dataset files absent: ([\w.-]+)", text):
        name = m.group(1).rstrip(":")
        if fetch := re.search(r"`(flb data fetch [^`]+)`", text):
            return ReasonGroup(f"no data for {name}", f"{fetch.group(1)} && {run}   # where there is network")
        return ReasonGroup(
            f"no data for {name}",
            f"put {name} under $FLB_DATA_ROOT (layout: README.md, Data), then {run} "
            "--config data_root=$FLB_DATA_ROOT",
        )
    if m := re.search(r"\b([\w-]+) is not available on this machine", text):
        return ReasonGroup(f"no data for {m.group(1)}", None, "no loader or files for it in this suite")
    if m := re.search(r"no weights for ([\w.-]+)", text):
        substitute = "FLB_WEIGHTS_DIR" in text  # the model has a substitute file, not found in the folder
        return ReasonGroup(
            f"no weights for {m.group(1)}",
            ("point FLB_WEIGHTS_DIR (--config weights_dir=...) at its substitute's folder, or " if substitute else "")
            + f"put torchvision's {m.group(1)} checkpoint in the torch hub cache (or allow the download), "
            f"then {run}",
        )  # fmt: skip
    if "full-model training" in text and "needs a GPU" in text:
        return ReasonGroup(
            "needs full-backbone training (GPU; estimates in the table's reasons)",
            f"{run} --config device=cuda   # on a GPU machine, or with the slurm profile (docs/cluster.md)",
        )
    if "outside the CI tier" in text:
        return ReasonGroup("outside the CI tier", f"{run} --config tier=full")
    if "not implemented" in text:
        return ReasonGroup("not implemented in this suite", None, "needs code, not a run")
    if "protocol table" in text or "descriptive dataset table" in text:
        return ReasonGroup("not a result table", None, "nothing to reproduce")
    if "illegible" in text:
        return ReasonGroup("paper value illegible", None, "see expected/")
    head = re.split(r"[;:(]", text, maxsplit=1)[0].strip() or "no reason given"
    return ReasonGroup(shorten(head, 70), None, "see the table's notes")


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
    groups: Counter[ReasonGroup] = Counter(reason_group(c.get("reason"), target) for c in not_run)
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
