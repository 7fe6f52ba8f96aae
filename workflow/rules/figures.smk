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
