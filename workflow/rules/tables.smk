# Paper-table targets: the plan (results/plans/<target>-<sha12>.json), assembly, verdict; free-form targets.
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


# The plan is written when the DAG is built (after the ledger of recorded runs, CHECKOUT.root/runs, filled the jobs
# it records: benchmark/tables/records.py; --config use_records=false ignores it), to a file named by its content (results/plans/<target>-<sha12>.json,
# never changed once written), and that exact file is the job's input and `flb table --plan` argument: a dry run
# or build with another config only adds another plan file, and cannot change the plan this build renders.
rule paper_table:
    input: unpack(wf.one_line_errors(lambda w: plan_inputs(w.target, config, CHECKOUT.root / LEDGER_DIR)))  # {"plan": ..., "runs": [...]}
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
        data=DATA,  # so does another data root (its partitions and class counts feed the cost cells)
    conda: CONDA_ENV
    shell: "{PY} table {wildcards.target} --plan {input.plan} 2> {log}"
