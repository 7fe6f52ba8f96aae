# fl-pretrain-bench workflow. Thin rules: every step calls the package's command line (benchmark/cli.py);
# paths, plans and parameters come from benchmark/workflow.py and benchmark/tables/. Usage:
#   snakemake --cores all table3          # legate2023 Table 3 -> results/tables/table3.md/.tex, checks, tidy;
#                                         # ends with a one-screen summary; exits non-zero only on a FAIL
#                                         # not in expected/known_findings.yaml (`flb verdict table3`)
#   snakemake --cores all fedcof_table3   # another paper's table
#   snakemake --cores all all_tables      # every table spec in paper_tables/ (no verdict exit)
#   snakemake --cores all ci_tables --config tier=ci   # the same under the CI tier; then
#   flb ci-gate results/checks/*.json     # unlisted FAILs / stale entries of expected/known_findings.yaml
#   snakemake --cores all smoke           # real CIFAR-10 subset, substitute SqueezeNet, closed-form heads
#   ... --config data_root=/path/to/data weights_dir=/path/to/weights tier=ci
from benchmark import workflow as wf
from benchmark.closed_form.protocols import PROTOCOLS
from benchmark.fl.protocols import list_protocols
from benchmark.jobs import ClosedFormJob, ExtractJob, FLRunJob, PartitionJob
from benchmark.tables.plan import plan_inputs
from benchmark.tables.spec import list_specs

configfile: str(wf.DEFAULT_CONFIG)
wf.validate_config(config)

# PYTHONPATH may be unset (the shell runs with `set -u`): append the old value only when there is one.
PLOTS = f"PYTHONPATH={workflow.basedir}${{PYTHONPATH:+:$PYTHONPATH}} python -m benchmark.fl.plots"
PY = f"PYTHONPATH={workflow.basedir}${{PYTHONPATH:+:$PYTHONPATH}} python -m benchmark.cli"
CONDA_ENV = "env/environment.yml"
PATHS = " ".join(
    f"--{flag} {config[key]}"
    for flag, key in (("data-root", "data_root"), ("weights-dir", "weights_dir"), ("cache-dir", "cache_dir"))
    if config.get(key)
)
TABLES = list_specs()
FL_PROTOCOLS = list_protocols()
FREEFORM = wf.closed_form_targets(config)
DATA = wf.data_root_identity(config)  # the resolved data root the data-reading jobs use

wildcard_constraints:
    seed=r"\d+",
    split="train|test",
    subset=r"all|stratified[1-9]\d*",


def table_outputs(target):
    return [f"results/tables/{target}.md", f"results/tables/{target}.tex", f"results/checks/{target}.json",
            f"results/tidy/{target}.csv"]


rule all_tables:
    localrule: True
    input: [f for t in TABLES for f in table_outputs(t)]


# Every table target under the CI tier (run it with --config tier=ci; .ci/run then calls `flb ci-gate`).
rule ci_tables:
    localrule: True
    input: [f for t in TABLES for f in table_outputs(t)]


# `snakemake <target>`: the assembly job (rule paper_table) always exits 0 and writes every output, since
# Snakemake would delete the outputs of a failing job; this rule then prints the run's summary and exits
# non-zero only when a cell FAILs that expected/known_findings.yaml does not explain.
for _t in TABLES:
    rule:
        name: _t
        localrule: True
        input: table_outputs(_t)
        params: target=_t
        shell: "{PY} verdict {params.target}"

for _t in FREEFORM:
    rule:
        name: _t
        localrule: True
        input: f"results/tidy/{_t}.csv"


rule extract:
    input: lambda w: wf.fetch_inputs(config, w.dataset, w.backbone, w.weights)  # planned downloads first
    output: ExtractJob.PATTERN
    log: "results/logs/extract/{dataset}/{backbone}-{weights}/{preprocess}-{precision}/{subset}/{split}.log"
    conda: CONDA_ENV
    resources: gpu=1
    params:
        device=f"--device {config['device']}" if config.get("device") else "",
        data=DATA,  # another data root (config or FLB_DATA_ROOT) re-runs the job (params trigger)
    shell:
        "{PY} extract --dataset {wildcards.dataset} --split {wildcards.split} --backbone {wildcards.backbone}"
        " --weights {wildcards.weights} --preprocess {wildcards.preprocess} --precision {wildcards.precision}"
        " --subset {wildcards.subset} --batch-size {config[batch_size]} {params.device} {PATHS}"
        " --out {output} 2> {log}"


rule partition:
    input: lambda w: wf.fetch_inputs(config, w.dataset)
    output: PartitionJob.PATTERN
    log: "results/logs/partition/{dataset}/{subset}/{ptag}/seed{seed}.log"
    conda: CONDA_ENV
    params:
        args=lambda w: wf.partition_cli_args(w.ptag),
        root=f"--data-root {config['data_root']}" if config.get("data_root") else "",
        data=DATA,  # another data root re-runs the job (params trigger)
    shell:
        "{PY} partition --dataset {wildcards.dataset} --subset {wildcards.subset} --seed {wildcards.seed}"
        " {params.args} {params.root} --out {output} 2> {log}"


rule closed_form:
    input: unpack(lambda w: wf.run_inputs(ClosedFormJob.from_wildcards(w)))
    output: ClosedFormJob.PATTERN
    wildcard_constraints:
        protocol="|".join(PROTOCOLS),
    log: "results/logs/closed_form/{dataset}/{model}-{weights}/{preprocess}-{precision}/{subset}/{ptag}/{protocol}/seed{seed}.log"
    conda: CONDA_ENV
    shell:
        "{PY} closed-form --train {input.train} --test {input.test} --partition {input.partition}"
        " --protocol {wildcards.protocol} --out {output} 2> {log}"


# One federated training run on cached features (LP, MLP head, LP after a closed-form head): the protocol
# (benchmark/fl/protocols.py) fixes every knob; its per-round curve is written beside the tidy rows.
rule fl_run:
    input: unpack(lambda w: wf.run_inputs(FLRunJob.from_wildcards(w)))
    output:
        tidy=FLRunJob.PATTERN,
        curve=FLRunJob.PATTERN.removesuffix(".csv") + ".curve.csv",
    log: "results/logs/fl/{dataset}/{model}-{weights}/{preprocess}-{precision}/{subset}/{ptag}/{protocol}/{method}/seed{seed}.log"
    wildcard_constraints:
        protocol="|".join(FL_PROTOCOLS),
        method=r"[a-z0-9_]+",
    threads: 1
    conda: CONDA_ENV
    params:
        device=f"--device {config['device']}" if config.get("device") else "",
    shell:
        "{PY} fl-run --protocol {wildcards.protocol} --method {wildcards.method} --train {input.train}"
        " --test {input.test} --partition {input.partition} --seed {wildcards.seed} --out {output.tidy}"
        " --curve {output.curve} {params.device} --no-progress 2> {log}"


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


rule freeform_collect:
    input: lambda w: wf.target_runs(config, w.target)
    output: "results/tidy/{target}.csv"
    wildcard_constraints:
        target="|".join(FREEFORM) or "^$",
    conda: CONDA_ENV
    params:
        methods=lambda w: ",".join(config["targets"][w.target]["methods"]),
        labels=lambda w: f"--label paper={config['targets'][w.target]['paper']} --label table={config['targets'][w.target]['table']}",
    shell: "{PY} collect {input} --methods {params.methods} {params.labels} --out {output}"


rule paper_table:
    input: lambda w: plan_inputs(w.target, config)  # writes results/plans/<target>.json once, read by `flb table`
    output:
        md="results/tables/{target}.md",
        tex="results/tables/{target}.tex",
        checks="results/checks/{target}.json",
        tidy="results/tidy/{target}.csv",
    log: "results/logs/tables/{target}.log"
    wildcard_constraints:
        target="|".join(TABLES),
    params:
        tier=config.get("tier", "full"),  # a tier change re-assembles the table (params rerun trigger)
        data=DATA,  # so does another data root (cost cells replay partitions from its labels)
    conda: CONDA_ENV
    shell: "{PY} table {wildcards.target} 2> {log}"


# Downloads planned when a cell's dataset (or torchvision checkpoint) is absent and the network is reachable
# (benchmark/tables/availability.py): `flb data fetch` verifies the official checksums before anything is
# extracted and writes the verified identity here; offline, such cells are NOT RUN with that command.
rule fetch_data:
    output: "results/data/{dataset}.json"
    log: "results/logs/data/{dataset}.log"
    wildcard_constraints:
        dataset=r"[a-z0-9_]+",
    params:
        root=f"--data-root {config['data_root']}" if config.get("data_root") else "",
        data=DATA,  # a new data root fetches again (params rerun trigger)
    shell: "{PY} data fetch {wildcards.dataset} {params.root} --marker {output} 2> {log}"


rule fetch_weights:
    output: "results/data/weights/{model}.json"
    log: "results/logs/data/weights/{model}.log"
    params:
        where=lambda w: str(wf.hub_dir()),
    shell: "{PY} data fetch --weights {wildcards.model} --marker {output} 2> {log}"


# Last rule: a requested name that no other rule produces (no folder, no suffix) ends here, with the list of
# targets; Snakemake's own "No rule to produce X" does not list them.
rule unknown_target:
    output: "{name}"
    wildcard_constraints:
        name=r"[^/.]+",
    input: lambda w: wf.unknown_target(w.name, [r.name for r in workflow.rules if not r.has_wildcards()])
