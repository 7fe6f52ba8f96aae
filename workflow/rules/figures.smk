# Figure targets (benchmark/workflow.py FIGURES): training curves of several runs in one plot.
for _f in wf.FIGURES:
    rule:
        name: _f
        localrule: True
        input: f"results/figures/{_f}.png"


rule figure:
    input: lambda w: [c for cs in wf.figure_series(config, w.figure).values() for c in cs]
    output: "results/figures/{figure}.png"
    wildcard_constraints:
        figure="|".join(wf.FIGURES),
    params:
        args=lambda w: wf.figure_plot_args(config, w.figure),
    shell: "{PLOTS} --out {output} {params.args}"


# bernier2024 Figs. 4.2-4.3 (benchmark/zo/figures.py): drawn from the fedmezo runner's run records.
from benchmark.zo.figures import ZO_FIGURES, figure_args as zo_figure_args, figure_jobs as zo_figure_jobs

for _f in ZO_FIGURES:
    rule:
        name: _f
        localrule: True
        input: f"results/figures/{_f}.png"


rule zo_figure:
    input: lambda w: [j.path for j in zo_figure_jobs(config, w.zo_figure).values()]
    output: "results/figures/{zo_figure}.png"
    wildcard_constraints:
        zo_figure="|".join(ZO_FIGURES),
    params:
        args=lambda w: zo_figure_args(config, w.zo_figure),
    shell: "python -m benchmark.zo.figures {wildcards.zo_figure} --out {output} {params.args}"
