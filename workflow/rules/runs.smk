# Runs on cached features: one output pattern per job type (benchmark/jobs.py), inputs from the job itself.
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
    resources: gpu_slots=1 if uses_gpu(config.get("device")) else 0  # a head on cached features: a small job
    params:
        device=f"--device {wf.shell_word(config['device'])}" if config.get("device") else "",
    shell:
        "{PY} fl-run --protocol {wildcards.protocol} --method {wildcards.method} --train {input.train}"
        " --test {input.test} --partition {input.partition} --seed {wildcards.seed} --out {output.tidy}"
        " --curve {output.curve} {params.device} --no-progress 2> {log}"
