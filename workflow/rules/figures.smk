# Figure targets (benchmark/figures/: one registry of every figure of the five documents). Each drawable
# figure NAME is a target `snakemake --cores all NAME` -> results/figures/NAME.{png,pdf,csv,json}; its inputs
# (training runs, closed-form runs, cached features) come from the figure's own `inputs(config)`, so the
# jobs it needs run first. `figures` draws every figure that runs under the config (`flb figure --list`).
import json as _json
import shlex as _shlex

from benchmark.figures.registry import get_figure, list_figures, runnable_figures

FIGURE_NAMES = [s.name for s in list_figures(drawable=True)]


def _figure_inputs(name):
    spec = get_figure(name)
    reason = spec.why_not(config)
    if reason is not None:
        raise ValueError(f"figure {name} does not run under this config: {reason}")
    paths = spec.inputs(config)
    _materialise_recorded(paths)
    return paths


def _materialise_recorded(paths):
    """Recorded runs (CHECKOUT.root/runs) of the figure's training jobs are put in place before the DAG is built
    (the tables' rules: benchmark.tables.records; use_records=false takes them away)."""
    from benchmark.ledger import usable_records
    from benchmark.tables.records import apply_to_jobs

    records = usable_records({}, CHECKOUT.root / LEDGER_DIR)  # by output path
    apply_to_jobs([records[p].job for p in paths if p in records], config, CHECKOUT.root / LEDGER_DIR)


for _f in FIGURE_NAMES:
    rule:
        name: _f
        localrule: True
        input: f"results/figures/{_f}.png"


# an input function: which figures run is asked (it checks data, features and runs on disk, seconds) only when
# `figures` is a target, not each time the workflow is parsed
rule figures:
    localrule: True
    input: lambda w: [f"results/figures/{f}.png" for f in runnable_figures(config)]


rule paper_figure:
    input: lambda w: _figure_inputs(w.figure)
    output:
        png="results/figures/{figure}.png",
        pdf="results/figures/{figure}.pdf",
        csv="results/figures/{figure}.csv",
        manifest="results/figures/{figure}.json",
    wildcard_constraints:
        figure="|".join(FIGURE_NAMES) or "no-figure",
    params:
        config=lambda w: _shlex.quote(_json.dumps(dict(config), default=str)),
    shell: "python -m benchmark.figures.render {wildcards.figure} --out {output.png} --config-json {params.config}"

