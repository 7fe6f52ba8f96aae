"""legate2023's figures (issue 14), registered in :mod:`benchmark.figures.registry`, with their copies in the
thesis (bernier2024 ch. 3: Figures 3.1-3.10, A.1) and the workshop version (legate2023ws).

Only CIFAR-10 is here (Flowers102, CUB, Stanford Cars, EuroSAT-Sub are not): every figure is its CIFAR-10
panel, the other panels are absent and the notes say so. Runs (:mod:`benchmark.figures.legate2023_runs`):
FedNCM is closed-form on cached SqueezeNet features (every setting, every tier); LP runs FedAvg on cached
features where ``benchmark/protocols/fl.yaml`` has the setting; FT / FedNCM+FT / Random train the full model
only when ``device=cuda`` (or ``cpu_training``) and ``fl_train.yaml`` has the setting. The readings are the
values the paper prints for the same setting: Table 2 (lines 155-159) at the primary setting (alpha 0.1,
K = 100, E = 1) and Table 3 (lines 238-240) for FedAdam.

* **Fig. 1** (line 210): accuracy vs rounds / communication / compute, CIFAR-10 panel; Random truncated at
  the other methods' last round, as the paper does (line 222). LP / FT oracle lines: not drawn, no oracle
  run in the workflow (the paper prints no oracle value either).
* **Fig. 2** (line 227): DistilBERT on AG News (§4.2.1) - not producible (no DistilBERT weights, no text
  runner for these methods).
* **Fig. 3** (line 252): Dirichlet alpha in {100, 0.1, 0.01} (line 264), CIFAR-10 panel.
* **Fig. 4** (line 257): local epochs (values not printed: 1, 2, 5 here).
* **Fig. 5** (line 262): FedAdam (client lr x server lr) grid, CIFAR-10 FT and FedNCM+FT: the tuning grid
  points of the training protocol (validation accuracy, App. B's grid).
* **Fig. 6** (line 269): clients K (not printed: 100, 200, 500, 1000 here).
* **Fig. 7** (line 426): Fig. 1 with Random's full training.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchmark.figures import legate2023_runs as runs
from benchmark.figures.registry import DrawnFigure, FigureSpec, Reading, register_figure
from benchmark.runners.fl_train import training_allowed

Config = Mapping[str, Any]

#: Table 2's CIFAR-10 rows (accuracy %, lines 155-159): the primary setting of every CIFAR-10 figure.
TABLE2_CIFAR10: dict[str, tuple[float, str]] = {
    "Random": (67.8, "legate2023:155"),
    "FT": (85.4, "legate2023:156"),
    "FedNCM+FT": (87.2, "legate2023:157"),
    "LP": (82.5, "legate2023:158"),
    "FedNCM": (64.8, "legate2023:159"),
}
#: Table 3, CIFAR-10 FedAdam (line 240): the best of Fig. 5's grids as the paper reports them.
TABLE3_FEDADAM: dict[str, tuple[float, str]] = {
    "FedNCM+FT": (89.4, "legate2023:240"),
    "FT": (88.2, "legate2023:240"),
}
SWEEP_SERIES = ("FedNCM", "LP", "FT", "FedNCM+FT")
CURVE_SERIES = ("LP", "FT", "FedNCM+FT", "Random")
ABSENT_DATASETS = (
    "Flowers102, CUB, Stanford Cars and EuroSAT-Sub are not on this machine: only the CIFAR-10 panel"
)
_SUBSTITUTE = (
    "SqueezeNet 1.1 features: the substitute weights unless torchvision's checkpoint is here (tidy 'weights')"
)


def _mean(vals: Sequence[float]) -> float | None:
    return round(sum(vals) / len(vals), 2) if vals else None


def _primary_readings(config: Config, series: Sequence[str], x: Any) -> tuple[Reading, ...]:
    out = []
    for name in series:
        if name not in TABLE2_CIFAR10:
            continue
        paper, source = TABLE2_CIFAR10[name]
        ours = _mean(runs.seed_values(runs.series_runs(config, name, runs.PRIMARY)))
        out.append(Reading(series=name, x=x, paper=paper, ours=ours, source=source))
    return tuple(out)


def _not_run_caption(notes: Sequence[str]) -> list[str]:
    """One short line per series some of whose points are not run (the notes hold the reasons)."""
    missing: dict[str, int] = {}
    for n in notes:
        if ": NOT RUN (" in n:
            name = n.split(" at ", 1)[0]
            missing[name] = missing.get(name, 0) + 1
    return [f"NOT RUN: {name} at {k} setting(s) (see the manifest's notes)" for name, k in missing.items()]


# ------------------------------------------------------------------------------------------------ sweeps
_SWEEPS: dict[str, dict[str, Any]] = {
    "legate2023_fig3": {
        "settings": [runs.Setting(alpha=a) for a in runs.ALPHAS],
        "x": lambda s: s.alpha,
        "primary_x": 0.1,
        "xlabel": "Dirichlet alpha (100: nearly iid; 0.01: very heterogeneous)",
        "title": "legate2023 Fig. 3 (CIFAR-10 panel): accuracy vs heterogeneity, K=100",
        "setting_note": "alpha values as §4.3 (line 264); K = 100, 30 % participation, E = 1",
    },
    "legate2023_fig4": {
        "settings": [runs.Setting(local_epochs=e) for e in runs.LOCAL_EPOCHS],
        "x": lambda s: s.local_epochs,
        "primary_x": 1,
        "xlabel": "local epochs per round",
        "title": "legate2023 Fig. 4 (CIFAR-10 panel): accuracy vs local epochs, alpha=0.1, K=100",
        "setting_note": "the paper prints no epoch values: E in {1, 2, 5} here; alpha 0.1, K = 100",
    },
    "legate2023_fig6": {
        "settings": [runs.Setting(clients=k) for k in runs.CLIENTS],
        "x": lambda s: s.clients,
        "primary_x": 100,
        "xlabel": "clients K (30 % per round)",
        "title": "legate2023 Fig. 6: accuracy vs number of clients, CIFAR-10, alpha=0.1",
        "setting_note": "the paper prints no client counts: K in {100, 200, 500, 1000} here; alpha 0.1, E = 1",
    },
}


def _sweep_inputs(name: str) -> Callable[[Config], list[str]]:
    def inputs(config: Config) -> list[str]:
        sw = _SWEEPS[name]
        return runs.inputs_of(config, SWEEP_SERIES, sw["settings"])

    return inputs


def _sweep_draw(name: str) -> Callable[[Config], DrawnFigure]:
    def draw(config: Config) -> DrawnFigure:
        sw = _SWEEPS[name]
        data, missing = runs.sweep_frame(config, SWEEP_SERIES, sw["settings"], sw["x"])
        readings = _primary_readings(config, SWEEP_SERIES, sw["primary_x"])
        notes = (
            sw["setting_note"],
            "FedNCM is closed-form (Alg. 1): the server's class means equal the centralised ones under any "
            "partition, so its accuracy cannot depend on the setting (up to float rounding)",
            "readings: Table 2 (the paper's primary setting); the paper prints no other point of this figure",
            *(
                ["CI tier (reduced budget): FedNCM away from the primary setting runs seed 0 only"]
                if config.get("tier", "full") == "ci"
                else []
            ),
            ABSENT_DATASETS if name != "legate2023_fig6" else "CIFAR-10 only, as the paper",
            _SUBSTITUTE,
            *missing,
        )
        xs = [sw["x"](s) for s in sw["settings"]]
        fig = _draw_mod().draw_sweep(
            data, xs=xs, xlabel=sw["xlabel"], title=sw["title"], readings=readings,
            caption=_not_run_caption(missing),
        )  # fmt: skip
        return DrawnFigure(fig, data, readings, notes)

    return draw


def _sweep_unavailable(name: str) -> Callable[[Config], str | None]:
    def unavailable(config: Config) -> str | None:
        reason = runs.features_reason(config)
        if reason:
            return reason
        sw = _SWEEPS[name]
        if name == "legate2023_fig4":
            # FedNCM does not depend on local epochs (the paper does not plot it); LP has a protocol at E = 1
            # only, so the sweep needs the training series (or LP protocols at other E)
            count = {
                s: sum(runs.series_runs(config, s, st).runs for st in sw["settings"])
                for s in ("LP", "FT", "FedNCM+FT")
            }
            if count["FT"] + count["FedNCM+FT"] == 0 and count["LP"] < 2:
                return (
                    "the local-epoch sweep needs FT / FedNCM+FT training (--config device=cuda) or LP protocols "
                    "at E != 1 (none in benchmark/protocols/fl.yaml)"
                )
        return None

    return unavailable


def _draw_mod() -> Any:
    from benchmark.figures import legate2023_draw  # local: heavy import (matplotlib, pandas)

    return legate2023_draw


# ------------------------------------------------------------------------------------------------ curves
def _curve_inputs(config: Config) -> list[str]:
    return runs.inputs_of(config, CURVE_SERIES, [runs.PRIMARY], curves=True) + runs.inputs_of(
        config, ("FedNCM",), [runs.PRIMARY]
    )


def _fedncm_singles(config: Config) -> tuple[Any, list[str]]:
    """FedNCM as one point per axis: round 1 (its single round), App. A's communication (Eq. 3 with R = 1:
    a head-sized message both ways, K clients, 4 bytes a float, Table 2's 4.1e-3 GB) and one forward pass
    per training sample (the suite's accounting of a closed-form stage, benchmark/fl/jobs.py)."""
    import pandas as pd  # local: heavy import (pandas)

    from benchmark.costs.comm import legate2023_comm_floats  # local: heavy import (torch, torchvision)

    fr = runs.fedncm_runs(config, runs.PRIMARY)
    vals = runs.seed_values(fr)
    if not vals:
        return pd.DataFrame(columns=["series", "axis", "x", "y"]), [f"FedNCM: NOT RUN ({fr.reason})"]
    y = sum(vals) / len(vals)
    comm_gb = (
        legate2023_comm_floats(512, 10, 0, num_clients=runs.PRIMARY.clients, rounds=1, participation=1.0)
        * 4
        / 1e9
    )
    rows = [("round", 1.0), ("communication", comm_gb), ("compute", 50000.0)]
    return pd.DataFrame([{"series": "FedNCM", "axis": a, "x": x, "y": y} for a, x in rows]), []


def _curves_draw(name: str) -> Callable[[Config], DrawnFigure]:
    full_random = name == "legate2023_fig7"

    def draw(config: Config) -> DrawnFigure:
        import pandas as pd  # local: heavy import (pandas)

        d = _draw_mod()
        curves, missing = {}, []
        for series in CURVE_SERIES:
            sr = runs.series_runs(config, series, runs.PRIMARY)
            if sr.runs:
                curves[series] = sr.curve_paths()
            else:
                missing.append(f"{series} at {runs.PRIMARY.describe()}: NOT RUN ({sr.reason})")
        points = d.curve_points(curves)
        singles, more = _fedncm_singles(config)
        missing += more
        max_round = None
        if not full_random and "Random" in curves and len(curves) > 1:
            others = points[(points["axis"] == "round") & (points["series"] != "Random")]
            max_round = float(others["x"].max()) if len(others) else None
        readings = _primary_readings(config, (*CURVE_SERIES, "FedNCM"), None)
        drawn = [r for r in readings if r.series in curves or r.series == "FedNCM"]
        title = (
            "legate2023 Fig. 7 (CIFAR-10 panel): Random's full training beside Fig. 1's methods"
            if full_random
            else "legate2023 Fig. 1 (CIFAR-10 panel): accuracy vs rounds, communication, compute"
        )
        notes = (
            "CIFAR-10, SqueezeNet, alpha 0.1, K = 100, 30 % participation, FedAvg, E = 1 (§4); mean and min-max band "
            "over 3 seeds",
            "LP / FT oracle lines not drawn: the workflow runs no centralised oracle and the paper prints no value",
            "FedNCM: one point at its single round (communication by App. A Eq. 3 with R = 1)",
            *(["Random truncated at the other methods' last round, as the paper's Fig. 1 (line 222)"]
              if max_round is not None else []),
            "readings: Table 2's final accuracies (dotted lines); ours is the mean selected accuracy of the runs",
            ABSENT_DATASETS,
            _SUBSTITUTE,
            *missing,
        )  # fmt: skip
        fig = d.draw_curves(points, title=title, singles=singles, readings=drawn, max_round=max_round,
                            caption=[m.split(": NOT RUN")[0] + ": NOT RUN" for m in missing])  # fmt: skip
        data = pd.concat(
            [points, singles.assign(stage="closed_form", n_seeds=len(runs.SEEDS))], ignore_index=True
        )
        return DrawnFigure(fig, data, readings, notes)

    return draw


def _fig1_unavailable(config: Config) -> str | None:
    reason = runs.features_reason(config)
    if reason:
        return reason
    if not any(runs.series_runs(config, s, runs.PRIMARY).runs for s in CURVE_SERIES):
        return "no curve series runs: LP is outside this tier (config 'ci_training') and training needs device=cuda"
    return None


def _fig7_unavailable(config: Config) -> str | None:
    sr = runs.series_runs(config, "Random", runs.PRIMARY)
    return None if sr.runs else f"Random's full training: {sr.reason}"


# ------------------------------------------------------------------------------------------------ Fig. 5
_GRID_METHODS = {"FT": "ft", "FedNCM+FT": "fedncm_ft"}


def _fig5_unavailable(config: Config) -> str | None:
    reason = runs.features_reason(config)
    if reason:
        return reason
    if not training_allowed(config):
        return (
            "the FedAdam grid trains the full model 2 x 20 times: --config device=cuda (or cpu_training=true)"
        )
    return None


def _fig5_inputs(config: Config) -> list[str]:
    return [j.path for m in _GRID_METHODS.values() for j in runs.grid_jobs(config, m)[1]]


def _fig5_draw(config: Config) -> DrawnFigure:
    import pandas as pd  # local: heavy import (pandas)

    from benchmark.tidy import read_tidy  # local: heavy import (pandas)

    grids, rows = {}, []
    for series, method in _GRID_METHODS.items():
        _proto, jobs = runs.grid_jobs(config, method)
        pts = []
        for j in jobs:
            t = read_tidy(j.path)
            acc = t[t["metric"] == "accuracy"]["value"]
            c, s = j.client_lr, j.server_lr  # type: ignore[attr-defined]
            pts.append(
                {
                    "series": series,
                    "client_lr": c,
                    "server_lr": s,
                    "y": float(acc.iloc[0]) if len(acc) else float("nan"),
                }
            )
        grids[f"CIFAR-10 {series} (FedAdam)"] = pd.DataFrame(pts)
        rows += pts
    data = pd.DataFrame(rows).assign(
        x=lambda f: [f"c{c:g}/s{s:g}" for c, s in zip(f["client_lr"], f["server_lr"], strict=True)]
    )
    readings = tuple(
        Reading(series=f"{k} (best of grid)", x=None, paper=v, ours=None, source=src)
        for k, (v, src) in TABLE3_FEDADAM.items()
    )
    notes = (
        "each cell: selected accuracy on a validation split of the training set (the tuning grid, App. B), "
        "not the test set; the paper's cells are test accuracies",
        "readings: Table 3's FedAdam test accuracies with the chosen lr; ours left empty (validation grid, not comparable)",
        "the Flowers panel is absent: " + ABSENT_DATASETS,
        _SUBSTITUTE,
    )
    fig = _draw_mod().draw_grids(
        grids, title="legate2023 Fig. 5 (CIFAR-10 panels): FedAdam learning-rate grid"
    )
    return DrawnFigure(fig, data, readings, notes)


# ------------------------------------------------------------------------------------------------ register
_FIG1_COPIES = (
    "bernier2024 Figure 3.1", "bernier2024 Figure 3.2", "bernier2024 Figure 3.3", "bernier2024 Figure 3.4",
    "bernier2024 Figure 3.5", "legate2023ws Figure 1",
)  # fmt: skip

register_figure(FigureSpec(
    name="legate2023_fig1", paper="legate2023", label="Fig. 1", line=210,
    title="CIFAR-10 panel: accuracy vs rounds, communication and compute (LP, FT, FedNCM+FT, Random, FedNCM)",
    draw=_curves_draw("legate2023_fig1"), inputs=_curve_inputs, unavailable=_fig1_unavailable, copies=_FIG1_COPIES,
))  # fmt: skip
register_figure(FigureSpec(
    name="legate2023_fig2", paper="legate2023", label="Fig. 2", line=227,
    title="DistilBERT on AG News (15 / 90 / 1470 examples per class): LP, FT, FedNCM+FT",
    reason="§4.2.1's NLP runs: AG News is here but no DistilBERT weights (no network) and no text runner for "
    "LP / FT / FedNCM+FT",
    copies=("bernier2024 Figure 3.6",),
))  # fmt: skip
register_figure(FigureSpec(
    name="legate2023_fig3", paper="legate2023", label="Fig. 3", line=252, title=_SWEEPS["legate2023_fig3"]["title"],
    draw=_sweep_draw("legate2023_fig3"), inputs=_sweep_inputs("legate2023_fig3"),
    unavailable=_sweep_unavailable("legate2023_fig3"), copies=("bernier2024 Figure 3.7", "legate2023ws Figure 2"),
))  # fmt: skip
register_figure(FigureSpec(
    name="legate2023_fig4", paper="legate2023", label="Fig. 4", line=257, title=_SWEEPS["legate2023_fig4"]["title"],
    draw=_sweep_draw("legate2023_fig4"), inputs=_sweep_inputs("legate2023_fig4"),
    unavailable=_sweep_unavailable("legate2023_fig4"), copies=("bernier2024 Figure 3.8", "legate2023ws Figure 4"),
))  # fmt: skip
register_figure(FigureSpec(
    name="legate2023_fig5", paper="legate2023", label="Fig. 5", line=262,
    title="FedAdam client x server learning-rate grid, CIFAR-10 FT and FedNCM+FT (validation accuracy)",
    draw=_fig5_draw, inputs=_fig5_inputs, unavailable=_fig5_unavailable,
    copies=("bernier2024 Figure 3.9", "legate2023ws Figure 6"),
))  # fmt: skip
register_figure(FigureSpec(
    name="legate2023_fig6", paper="legate2023", label="Fig. 6", line=269, title=_SWEEPS["legate2023_fig6"]["title"],
    draw=_sweep_draw("legate2023_fig6"), inputs=_sweep_inputs("legate2023_fig6"),
    unavailable=_sweep_unavailable("legate2023_fig6"), copies=("bernier2024 Figure 3.10",),
))  # fmt: skip
register_figure(FigureSpec(
    name="legate2023_fig7", paper="legate2023", label="Fig. 7", line=426,
    title="CIFAR-10 panel: Fig. 1 with Random trained to the end",
    draw=_curves_draw("legate2023_fig7"), inputs=_curve_inputs, unavailable=_fig7_unavailable,
    copies=("bernier2024 Figure A.1", "legate2023ws Figure 3"),
))  # fmt: skip
