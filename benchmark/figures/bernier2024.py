"""bernier2024 (the thesis)'s own figures: ch. 4 (FedMeZO). Its ch. 3 figures (3.1-3.10) are legate2023's
(same runs, one panel per dataset): they are registered once, in :mod:`benchmark.figures.legate2023`, with the
thesis figure named in ``copies``.

* **Figure 4.1** (line 598): the FedMeZO protocol diagram, no data.
* **Figures 4.2-4.3** (lines 611, 657): drawn by :mod:`benchmark.figures.bernier2024_runs` from the fedmezo
  runner's run records (FedMeZO vs DistMeZO naive, final accuracy; FedMeZO / SLoRA, IID / non-IID, accuracy
  vs rounds), with Table 4.1's printed final accuracies (RoBERTa-large) as the readings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchmark.errors import ConfigError
from benchmark.figures import bernier2024_runs as zo
from benchmark.figures.bernier2024_runs import figure_jobs
from benchmark.figures.registry import DrawnFigure, FigureSpec, Reading, register_figure
from benchmark.runners.fl_train import training_allowed

_SUBSTITUTE = (
    "Substitute encoder all-MiniLM-L6-v2 (the thesis: RoBERTa-large) unless zo_encoder=roberta-large; "
    "budgets as the config's zo_k_shot / zo_rounds (the record's spec says which)."
)


def _unavailable(config: Mapping[str, Any], name: str = "bernier2024_fig4_3") -> str | None:
    if training_allowed(config):
        return None
    try:  # every run recorded (runs/, docs/ledger.md): drawn from the records, no training here
        figure_jobs(config, name)
        return None
    except ConfigError:
        pass
    return (
        "needs FedMeZO / DistMeZO / SLoRA training runs: --config cpu_training=true zo_k_shot=16 (a CPU, "
        "hours) or device=cuda"
    )


def _inputs(name: str):
    def inputs(config: Mapping[str, Any]) -> list[str]:
        return [str(j.path) for j in figure_jobs(config, name).values()]

    return inputs


def _draw(name: str):
    def draw(config: Mapping[str, Any]) -> DrawnFigure:
        import pandas as pd  # local: heavy import (pandas)

        records = zo.load_records(config, name)
        readings = tuple(Reading(**r) for r in zo.thesis_readings(name, records))
        budgets = sorted(
            {f"{r['spec'].get('rounds')} rounds, k-shot {r['spec'].get('k_shot')}" for r in records.values()}
        )
        notes = (_SUBSTITUTE, "run budgets: " + "; ".join(budgets))
        return DrawnFigure(
            zo.draw(name, records), pd.DataFrame(zo.figure_data(name, records)), readings, notes
        )

    return draw


register_figure(FigureSpec(
    name="bernier2024_fig4_1", paper="bernier2024", label="Figure 4.1", line=598,
    title="FedMeZO protocol: the server's seed shared with every client", reason="a diagram of the protocol (no data)",
))  # fmt: skip
for _name, _line, _title in (
    ("bernier2024_fig4_2", 611, "FedMeZO vs DistMeZO naive: final accuracy per task (non-IID)"),
    ("bernier2024_fig4_3", 657, "FedMeZO and SLoRA, IID and non-IID: accuracy vs rounds"),
):
    register_figure(FigureSpec(
        name=_name, paper="bernier2024", label=f"Figure {_name.removeprefix('bernier2024_fig').replace('_', '.')}",
        line=_line, title=_title, draw=_draw(_name), inputs=_inputs(_name),
        unavailable=lambda config, name=_name: _unavailable(config, name),
    ))  # fmt: skip
