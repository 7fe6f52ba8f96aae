"""bernier2024 Figs. 4.2 and 4.3 as targets, from the fedmezo runner's runs.

* **Fig. 4.2** "final accuracy between models trained using FedMeZO and a naive implementation of MeZO in the
  distributed setting (DistMeZO Naive)" per task: bars, non-IID (α = 0.1, where §4.1.2 says independent seeds
  hurt), same round budget for both; DistMeZO with :data:`~benchmark.runners.fedmezo.DISTMEZO_LOCAL_STEPS`
  local steps (the thesis gives no number).
* **Fig. 4.3** "accuracy between models trained using FedMeZO, SLoRA on iid data and SLoRA on non-iid data":
  test accuracy against rounds per task, FedMeZO IID and non-IID (they should coincide) and SLoRA IID /
  non-IID; the thesis's Table 4.1 final values (RoBERTa-large) are marked at the right edge for reference.

Both need training runs (``--config cpu_training=true`` on a CPU, with ``zo_k_shot=16``; or ``device=cuda``);
``zo_figure_tasks`` limits the tasks (e.g. ``'[sst2]'`` on a CPU).
The figure targets (``snakemake bernier2024_fig4_2``, :mod:`benchmark.figures.bernier2024`) read the records with
:func:`load_records` and draw them with :func:`draw`, :func:`figure_data` and :func:`thesis_readings`.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

from benchmark.errors import ConfigError
from benchmark.io import read_verified_json
from benchmark.ledger import all_recorded
from benchmark.runners.fedmezo import selects_on_validation, validated_job, zo_job
from benchmark.runners.fl_train import training_allowed

#: name -> kind, title, tasks, series label -> (method, alpha); partitions as Table 4.1's protocol.
ZO_FIGURES: dict[str, dict[str, Any]] = {
    "bernier2024_fig4_2": {
        "kind": "bars",
        "title": "bernier2024 Fig. 4.2: FedMeZO vs DistMeZO naive, final accuracy (non-IID, substitute MiniLM)",
        "tasks": ["sst2", "sst5"],
        "series": {"FedMeZO": ("fedmezo", 0.1), "DistMeZO naive": ("distmezo", 0.1)},
    },
    "bernier2024_fig4_3": {
        "kind": "curves",
        "title": "bernier2024 Fig. 4.3: FedMeZO and SLoRA, IID and non-IID (substitute MiniLM)",
        "tasks": ["sst2", "sst5"],
        "series": {
            "FedMeZO IID": ("fedmezo", 100.0),
            "FedMeZO non-IID": ("fedmezo", 0.1),
            "SLoRA IID": ("slora", 100.0),
            "SLoRA non-IID": ("slora", 0.1),
        },
    },
}
#: Table 4.1's printed round counts (the default budget) and final accuracies (RoBERTa-large), for reference.
PRINTED_ROUNDS = {"sst2": 2621, "sst5": 969, "mnli": 1705}
THESIS_ACCURACY = {
    ("sst2", "fedmezo", 100.0): 89.7, ("sst2", "fedmezo", 0.1): 89.7, ("sst2", "slora", 100.0): 93.5,
    ("sst2", "slora", 0.1): 83.1, ("sst5", "fedmezo", 100.0): 41.4, ("sst5", "fedmezo", 0.1): 41.4,
    ("sst5", "slora", 100.0): 52.0, ("sst5", "slora", 0.1): 41.8,
}  # fmt: skip


def figure_jobs(config: Mapping[str, Any], name: str) -> dict[tuple[str, str], Any]:
    """(series label, task) -> the job the figure reads: a :class:`~benchmark.runners.fedmezo.ZOTrainJob`, or for
    FedMeZO without ``zo_lr`` its validated run (:class:`~benchmark.runners.fedmezo.ZOValidatedJob`: the test
    accuracy before training and at the round chosen on validation)."""
    if name not in ZO_FIGURES:
        raise ConfigError(f"no figure {name!r}", f"use one of: {', '.join(sorted(ZO_FIGURES))}")
    fig = ZO_FIGURES[name]
    out = {}
    tasks = config.get("zo_figure_tasks") or fig["tasks"]
    unknown = sorted(set(tasks) - set(PRINTED_ROUNDS))
    if unknown:
        raise ConfigError(f"zo_figure_tasks {unknown}", f"use some of {sorted(PRINTED_ROUNDS)}")
    for label, (method, alpha) in fig["series"].items():
        for task in tasks:
            rounds = int(config.get("zo_rounds") or PRINTED_ROUNDS[task])
            if selects_on_validation(method, config):  # issue 26: FedMeZO at its validated lr and round
                out[(label, task)] = validated_job(task, alpha, rounds, 0, config)
            else:
                out[(label, task)] = zo_job(task, method, alpha, rounds, 0, config)

    if not training_allowed(config) and not all_recorded(out.values(), config):
        raise ConfigError(
            f"figure {name} needs training runs (FedMeZO, DistMeZO, SLoRA)",
            "run with --config cpu_training=true zo_k_shot=16 (a CPU) or device=cuda (or record them: docs/ledger.md)",
        )
    return out


def load_records(config: Mapping[str, Any], name: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(series label, task) -> the run record of each job of :func:`figure_jobs` (they must exist)."""
    return {key: read_verified_json(job.path) for key, job in figure_jobs(config, name).items()}


def figure_data(name: str, records: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The plotted values as tidy rows (``series, task, x, y``): final accuracies (Fig. 4.2: series = method,
    x = task) or the evaluated rounds' accuracies (Fig. 4.3: series = ``<task>/<label>``, x = round, round 0 =
    the FedNCM head before training)."""
    rows: list[dict[str, Any]] = []
    for (label, task), rec in records.items():
        if ZO_FIGURES[name]["kind"] == "bars":
            rows.append({"series": label, "task": task, "x": task, "y": rec.get("final_accuracy")})
            continue
        if rec.get("initial_accuracy") is not None:
            rows.append({"series": f"{task}/{label}", "task": task, "x": 0, "y": rec["initial_accuracy"]})
        rows += [
            {"series": f"{task}/{label}", "task": task, "x": r["round"] + 1, "y": r["test_accuracy"]}
            for r in rec["rounds"]
            if r.get("test_accuracy") is not None
        ]
    return rows


def thesis_readings(name: str, records: Mapping[tuple[str, str], Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Table 4.1's printed final accuracies (RoBERTa-large) beside our final ones, per (series, task)."""
    out = []
    for (label, task), rec in records.items():
        spec = rec["spec"]
        printed = THESIS_ACCURACY.get((task, spec["method"], float(spec["alpha"])))
        if printed is not None:
            out.append({"series": f"{label} ({task})", "x": task, "paper": printed,
                        "ours": rec.get("final_accuracy"), "source": "bernier2024 Table 4.1"})  # fmt: skip
    return out


def draw(name: str, records: Mapping[tuple[str, str], Mapping[str, Any]]):
    """The matplotlib figure (object API, Agg canvas) of ``name`` from the run records."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # local: heavy import (matplotlib)
    from matplotlib.figure import Figure  # local: heavy import (matplotlib)

    fig_spec = ZO_FIGURES[name]
    tasks = list(dict.fromkeys(t for _, t in records))
    labels = list(dict.fromkeys(lbl for lbl, _ in records))
    fig = Figure(
        figsize=(5 * len(tasks), 4) if fig_spec["kind"] == "curves" else (6, 4), layout="constrained"
    )
    FigureCanvasAgg(fig)
    if fig_spec["kind"] == "bars":
        ax = fig.add_subplot()
        width = 0.8 / max(len(labels), 1)
        for i, label in enumerate(labels):
            vals = [records.get((label, t), {}).get("final_accuracy") for t in tasks]
            xs = [j + i * width for j in range(len(tasks))]
            bars = ax.bar(xs, [v or 0 for v in vals], width, label=label)
            for b, v in zip(bars, vals, strict=True):
                ax.annotate("n/a" if v is None else f"{v:.1f}", (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=8)  # fmt: skip
        ax.set_xticks(
            [j + width * (len(labels) - 1) / 2 for j in range(len(tasks))], [t.upper() for t in tasks]
        )
        ax.set_ylabel("final test accuracy (%)")
        for j, task in enumerate(tasks):  # the FedNCM head's accuracy before training, per task
            start = next((r.get("initial_accuracy") for (_, t), r in records.items() if t == task), None)
            if start is not None:
                ax.hlines(
                    start, j - width / 2, j + width * (len(labels) - 0.5), colors="k", linestyles="dashed"
                )
        budget = "; ".join(
            f"{lbl}: {r['spec'].get('rounds', '?')} rounds x {r['spec'].get('local_steps', 1)} local step(s)"
            for (lbl, t), r in records.items() if t == tasks[0]
        )  # fmt: skip
        ax.set_title(budget + "\ndashed: FedNCM head before training", fontsize=8)
        ax.legend(loc="lower right")
    else:
        for j, task in enumerate(tasks):
            ax = fig.add_subplot(1, len(tasks), j + 1)
            for label in labels:
                rec = records.get((label, task))
                if rec is None:
                    continue
                pts = [
                    (r["round"] + 1, r["test_accuracy"])
                    for r in rec["rounds"]
                    if r.get("test_accuracy") is not None
                ]
                if rec.get("initial_accuracy") is not None:
                    pts.insert(0, (0, rec["initial_accuracy"]))
                if pts:
                    line = ax.plot(*zip(*pts, strict=True), marker=".", label=label)[0]
                    spec = rec["spec"]
                    printed = THESIS_ACCURACY.get((task, spec["method"], float(spec["alpha"])))
                    if printed is not None:
                        ax.plot([pts[-1][0]], [printed], marker="*", ms=10, color=line.get_color(), ls="none")
            ax.set_title(f"{task.upper()} (stars: thesis, RoBERTa-large)", fontsize=9)
            ax.set_xlabel("rounds")
            ax.set_ylabel("test accuracy (%)")
            ax.legend(fontsize=7)
    fig.suptitle(textwrap.fill(fig_spec["title"], 70), fontsize=9)
    return fig
