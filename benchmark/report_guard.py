"""What a set of check reports was built with, whether its pages may replace the committed ones, and writing
those pages all or nothing (issue 23).

``flb report --readme README.md`` replaces committed text (the README's totals, ``docs/results/*.md``). It
must never do so silently with results of another kind than the committed ones: a CI-tier build over a
full one, a ``table_subset=stratified100`` or ``cell_filter`` build, a build of one target over the totals
of all of them. So

* the configuration is read from the check reports themselves (:func:`build_config`: their ``tier``, which
  names a subset, their ``settings`` when present, the cells whose typed reason is ``not selected``), never from
  the ``--command`` a user types (:func:`check_command` refuses one that contradicts them);
* every page it writes records that configuration in a comment (:data:`CONFIG_MARK`), so the next run can
  compare (:func:`read_committed` also reads the pages written before the mark existed);
* :func:`conflicts` lists what differs; :func:`refuse_conflicts` turns them into one error unless forced;
* :func:`write_together` writes every file or none (each to a temporary file beside it, all renamed into
  place once all are written); a failed write is one :class:`ReportWriteError` naming the folder.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.errors import BenchmarkError, DiskFullError, NotWritableError
from benchmark.io import atomic_path
from benchmark.reasons import ReasonKind, reason_from_json

#: The comment every generated page and the README section end with (format: :meth:`Built.mark`).
CONFIG_MARK = re.compile(r"<!-- flb report: built with `--config ([^`]*)` \((\d+) targets?\) -->")
_TIER_NOTE = re.compile(r"\((\S+) subset")
_LEGACY_PAGE_TIER = re.compile(r"\(tier `([^`]*)`\)")
_LEGACY_STAMP = re.compile(r"Produced [^`]* by `([^`]*)`")
_INDEX_LINK = re.compile(r"\[([\w.-]+)\]\(\./\1\.md\)")
_COMMAND_KEYS = re.compile(r"\b(tier|table_subset|cell_filter|device|cpu_training)=(\"[^\"]*\"|'[^']*'|\S+)")


class ReportConflictError(BenchmarkError):
    """The check reports were built otherwise than the committed pages they would replace."""


class ReportWriteError(BenchmarkError):
    """A page or the site could not be written (disk full, read-only); nothing was changed."""


@dataclass(frozen=True, order=True)
class BuildConfig:
    """The settings of a build that make its verdicts comparable (or not) with another build's."""

    tier: str = "full"
    table_subset: str = "all"
    cell_filter: str | None = None
    training: str | None = None  # ``device=cuda`` / ``cpu_training=true``: training cells were planned

    @property
    def label(self) -> str:
        """``tier=ci``, ``tier=full table_subset=stratified100``, ``tier=full device=cuda``: as ``--config``
        would be given."""
        parts = [f"tier={self.tier}"]
        if self.table_subset != "all":
            parts.append(f"table_subset={self.table_subset}")
        if self.cell_filter:
            parts.append(f"cell_filter={self.cell_filter}")
        if self.training:
            parts.append(self.training)
        return " ".join(parts)


def training_setting(settings: Mapping[str, Any]) -> str | None:
    """The setting that planned full-model training in a build (``--config device=cuda[:N]`` or
    ``cpu_training=true``), or ``None``: without one, every training cell is NOT RUN, so the totals differ."""
    if str(settings.get("cpu_training")).lower() == "true":  # a boolean, or the text of a --config
        return "cpu_training=true"
    device = str(settings.get("device") or "")
    return f"device={device}" if device.startswith("cuda") else None


def config_build(config: Mapping[str, Any]) -> BuildConfig:
    """The :class:`BuildConfig` of a workflow config (what a figure drawn under it was built with)."""
    cell_filter = config.get("cell_filter")
    return BuildConfig(str(config.get("tier") or "full"), str(config.get("table_subset") or "all"),
                       str(cell_filter) if cell_filter else None, training_setting(config))  # fmt: skip


def tier_config(tier_text: str) -> BuildConfig:
    """The configuration a check report's ``tier`` names (``ci``, ``full (stratified100 subset: ...)``)."""
    text = str(tier_text or "full").strip() or "full"
    note = _TIER_NOTE.search(text)
    return BuildConfig(text.split(" ", 1)[0], note.group(1) if note else "all")


def build_config(report: Mapping[str, Any]) -> BuildConfig:
    """The configuration one check report was built with: its ``tier`` (and the subset it names), its
    ``settings`` where the report has them, and a ``cell_filter`` its NOT RUN cells name."""
    settings = report.get("settings") if isinstance(report.get("settings"), Mapping) else {}
    base = tier_config(str(report.get("tier") or settings.get("tier") or "full"))
    subset = str(settings.get("table_subset") or base.table_subset)
    cell_filter = settings.get("cell_filter")
    if cell_filter is None:
        for c in report.get("cells") or []:
            why = reason_from_json(c.get("not_run"))
            if why is not None and why.kind is ReasonKind.NOT_SELECTED:
                cell_filter = why.missing
                break
    return BuildConfig(base.tier, subset, str(cell_filter) if cell_filter else None, training_setting(settings))


@dataclass(frozen=True)
class Built:
    """The configurations of a set of check reports: ``label -> targets``."""

    by_label: Mapping[str, tuple[str, ...]]

    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(sorted(t for ts in self.by_label.values() for t in ts))

    @property
    def mixed(self) -> bool:
        return len(self.by_label) > 1

    @property
    def label(self) -> str:
        """The one configuration's label, or ``mixed`` (each with its targets: :meth:`describe`)."""
        return next(iter(self.by_label)) if len(self.by_label) == 1 else "mixed"

    def describe(self) -> str:
        """``tier=ci`` or ``tier=ci: 55 targets; tier=full: table2``."""
        if not self.mixed:
            return self.label
        return "; ".join(f"{label}: {_names(ts)}" for label, ts in sorted(self.by_label.items()))

    def sentence(self) -> str:
        """What the README's stamp says about the reports' configuration."""
        n = len(self.targets)
        what = f"the check reports of {n} target{'s' if n != 1 else ''}"
        if not self.mixed:
            return f"{what}, built with `--config {self.label}`"
        parts = ", ".join(f"`--config {lb}` ({len(ts)})" for lb, ts in sorted(self.by_label.items()))
        return f"{what}, built with DIFFERENT configurations: {parts}"

    def mark(self) -> str:
        """The machine-readable comment of :data:`CONFIG_MARK`."""
        n = len(self.targets)
        return f"<!-- flb report: built with `--config {self.label}` ({n} target{'s' if n != 1 else ''}) -->"


def built(reports: Iterable[Mapping[str, Any]]) -> Built:
    """The configurations of ``reports`` (from :func:`benchmark.report.load_checks`)."""
    out: dict[str, list[str]] = {}
    for r in reports:
        out.setdefault(build_config(r).label, []).append(str(r["target"]))
    return Built({k: tuple(sorted(v)) for k, v in sorted(out.items())})


def _names(targets: Sequence[str], n: int = 3) -> str:
    shown = ", ".join(targets[:n])
    return shown + (f" and {len(targets) - n} more" if len(targets) > n else "")


def command_config(command: str) -> dict[str, str]:
    """The comparable ``key=value`` settings a command line names (``tier``, ``table_subset``, ``cell_filter``)."""
    return {k: v.strip("'\"") for k, v in _COMMAND_KEYS.findall(command)}


def check_command(command: str | None, new: Built, checks: str | Path) -> None:
    """Refuse a ``--command`` label that names another configuration than the check reports were built with."""
    if not command:
        return
    named = command_config(command)
    if not named:
        return
    for label, targets in new.by_label.items():
        have = dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", label))
        said = {k: v for k, v in named.items() if k in ("tier", "table_subset", "cell_filter")}
        if {"device", "cpu_training"} & named.keys():  # compared as what they plan: training or not
            said["training"] = training_setting(named) or "none"
            have["training"] = next((f"{k}={have[k]}" for k in ("cpu_training", "device") if k in have), "none")
        for key, value in said.items():
            if have.get(key, {"table_subset": "all"}.get(key)) != value:
                raise ReportConflictError(
                    f"--command says {key}={value}, but the check reports in {checks} were built with "
                    f"`--config {label}` ({_names(targets)})",
                    "leave --command out (the label is read from the check reports), or give the command "
                    "that built them",
                )


@dataclass(frozen=True)
class Committed:
    """What the committed README section and pages were built with (``None``: not recorded)."""

    readme_label: str | None = None
    readme_targets: int | None = None
    index_targets: tuple[str, ...] = ()
    page_labels: Mapping[str, str] = field(default_factory=dict)


def _page_label(text: str) -> str | None:
    if m := CONFIG_MARK.search(text):
        return m.group(1)
    if m := _LEGACY_PAGE_TIER.search(text):  # pages written before the mark: "(tier `ci`)"
        return tier_config(m.group(1)).label
    return None


def _section_label(text: str) -> tuple[str | None, int | None]:
    if m := CONFIG_MARK.search(text):
        return m.group(1), int(m.group(2))
    if m := _LEGACY_STAMP.search(text):  # "Produced ... by `snakemake ... --config tier=ci`"
        named = command_config(m.group(1))
        return BuildConfig(named.get("tier", "full"), named.get("table_subset", "all"),
                           named.get("cell_filter"), training_setting(named)).label, None  # fmt: skip
    return None, None


def read_committed(readme_section: str | None, pages: Path, page_mark: str) -> Committed:
    """The configurations of the committed README section (its text between the markers) and of the generated
    pages under ``pages`` (those starting with ``page_mark``)."""
    label, count = _section_label(readme_section) if readme_section else (None, None)
    index = pages / "README.md"
    targets: tuple[str, ...] = ()
    if index.is_file():
        text = index.read_text(encoding="utf-8")
        if text.startswith(page_mark):
            targets = tuple(dict.fromkeys(_INDEX_LINK.findall(text)))
            if label is None:
                label, count = _section_label(text)
    labels = {}
    for page in sorted(pages.glob("*.md")) if pages.is_dir() else []:
        if page.name == "README.md":
            continue
        text = page.read_text(encoding="utf-8")
        if text.startswith(page_mark) and (lb := _page_label(text)) is not None:
            labels[page.stem] = lb
    return Committed(label, count, targets, labels)


def conflicts(new: Built, old: Committed, pages: Path) -> list[str]:
    """Everything the new pages would replace that was built otherwise (empty: nothing)."""
    out = []
    if new.mixed:
        out.append(f"the check reports were built with different configurations ({new.describe()})")
    if old.readme_label is not None and (new.mixed or new.label != old.readme_label):
        out.append(f"the committed totals were built with `--config {old.readme_label}`, the check reports "
                   f"with {'different ones' if new.mixed else f'`--config {new.label}`'}")  # fmt: skip
    pairs: dict[tuple[str, str], list[str]] = {}
    for label, targets in new.by_label.items():
        for t in targets:
            if t in old.page_labels and old.page_labels[t] != label:
                pairs.setdefault((old.page_labels[t], label), []).append(str(pages / f"{t}.md"))
    for (was, now), files in sorted(pairs.items()):
        out.append(f"{len(files)} committed page(s) ({_names(files)}) were built with `--config {was}`, their "
                   f"check reports with `--config {now}`")  # fmt: skip
    missing = sorted(set(old.index_targets) - set(new.targets))
    if missing:
        out.append(f"the committed totals count {len(old.index_targets)} targets, the check reports only "
                   f"{len(new.targets)} (missing: {_names(missing)})")  # fmt: skip
    elif not old.index_targets and old.readme_targets is not None and old.readme_targets > len(new.targets):
        out.append(f"the committed totals count {old.readme_targets} targets, the check reports only "
                   f"{len(new.targets)}")  # fmt: skip
    return out


def refuse_conflicts(problems: Sequence[str], old: Committed, *, force: bool) -> None:
    """One :class:`ReportConflictError` naming what differs, unless ``force``."""
    if not problems or force:
        return
    more = f" (and {len(problems) - 2} more difference(s))" if len(problems) > 2 else ""
    label = old.readme_label or next(iter(sorted(set(old.page_labels.values()))), None)
    rebuild = "rebuild every target with the committed configuration"
    if label:
        target = "ci_tables" if "tier=ci" in label.split(" ") else "all_tables"
        rebuild = f"rebuild every target as committed (`snakemake --cores all {target} --config {label}`)"
    raise ReportConflictError(
        "flb report would replace committed results built otherwise: " + "; ".join(problems[:2]) + more,
        f"{rebuild}, or pass --force to replace them anyway (pages of other targets are kept)",
    )


#: What a failed write raises: the OS error, or the atomic writer's own error for ENOSPC / EROFS / EACCES
#: (:func:`benchmark.io.write_errors`, raised from the OS error).
WRITE_FAILURES = (OSError, DiskFullError, NotWritableError)


def write_failure_reason(exc: BaseException) -> str:
    """The OS's words for a failed write (``No space left on device``), from the error or its cause."""
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    return (cause.strerror if isinstance(cause, OSError) else None) or str(exc)


def write_together(files: Mapping[Path, str]) -> None:
    """Write every file of ``files`` or none: each goes to a temporary file beside it, and all are renamed
    into place only once every one is complete; on any failure the temporary files are removed, the
    destinations keep their old content and one :class:`ReportWriteError` names the folder that failed."""
    current: Path | None = None
    try:
        with contextlib.ExitStack() as stack:
            for path, text in files.items():
                current = path
                stack.enter_context(atomic_path(path)).write_text(text, encoding="utf-8")
            current = None  # the renames, on leaving the stack
    except WRITE_FAILURES as exc:
        cause = exc if isinstance(exc, OSError) else exc.__cause__
        filename = cause.filename if isinstance(cause, OSError) else None
        where = current or Path(filename or next(iter(files), Path("x")))
        state = "nothing was changed" if current is not None else "some files may already be replaced"
        raise ReportWriteError(
            f"cannot write the report into {where.parent}: {write_failure_reason(exc)} ({state})",
            "free space on that disk (or make it writable) and run the command again",
        ) from exc
