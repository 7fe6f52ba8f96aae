# Features (pointer JSONs into the content-addressed cache) and partitions: typed jobs of benchmark/jobs.py.
# Extraction's progress lines (images done / total, img/s, time left: benchmark.federated.progress.CountProgress) go to
# its log and, through tee, to the terminal (Snakemake runs rules under bash).
rule extract:
    input: lambda w: wf.fetch_inputs(config, w.dataset, w.backbone, w.weights)  # planned downloads first
    output: ExtractJob.PATTERN
    log: "results/logs/extract/{dataset}/{backbone}-{weights}/{preprocess}-{precision}/{subset}/{split}.log"
    conda: CONDA_ENV
    resources: gpu=1, gpu_slots=SLOTS_PER_GPU if uses_gpu(config.get("device")) else 0
    # First whenever ready: on a CPU the extractions of the CIFAR train splits (about 15 min each on a 2-core
    # EPYC) are a build's longest path, and the partitions, class counts and FedMeZO runs fill the other cores.
    priority: 10
    params:
        device=f"--device {wf.shell_word(config['device'])}" if config.get("device") else "",
        data=DATA,  # another data root (config or FLB_DATA_ROOT) re-runs the job (params trigger)
    shell:
        "{PY} extract --dataset {wildcards.dataset} --split {wildcards.split} --backbone {wildcards.backbone}"
        " --weights {wildcards.weights} --preprocess {wildcards.preprocess} --precision {wildcards.precision}"
        " --subset {wildcards.subset} --batch-size {config[batch_size]} {params.device} {PATHS}"
        " --out {output} 2> >(tee {log} >&2)"


rule partition:
    input: lambda w: wf.fetch_inputs(config, w.dataset)
    output: PartitionJob.PATTERN
    log: "results/logs/partition/{dataset}/{subset}/{ptag}/seed{seed}.log"
    conda: CONDA_ENV
    params:
        args=lambda w: wf.partition_cli_args(w.ptag),
        root=f"--data-root {wf.shell_word(config['data_root'])}" if config.get("data_root") else "",
        data=DATA,  # another data root re-runs the job (params trigger)
    shell:
        "{PY} partition --dataset {wildcards.dataset} --subset {wildcards.subset} --seed {wildcards.seed}"
        " {params.args} {params.root} --out {output} 2> {log}"
