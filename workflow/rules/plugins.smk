# Jobs of runner plug-ins (benchmark/runners/<name>.py): one rule per job type a plug-in registers that no rule
# above produces. The job rebuilds itself from the wildcards of its own output pattern and runs via `flb job`.
# A job class may declare the resources its rule asks for as a class attribute
#     RESOURCES: ClassVar[dict] = {"gpu": 1}
# (Snakemake resource name -> an int or str, or a callable taking the job instance and returning one). Hardware
# needs belong there, so that every executor sees them: the local profile's `resources: gpu=1` runs such jobs one
# at a time, the SLURM executor plug-in turns `gpu: 1` into `sbatch --gpus=1`. Every such rule also asks for
# `gpu_slots` (benchmark/gpu_slots.py): the local and default profiles offer 4 per GPU, small pfl jobs take 1. Cluster-specific values
# (partition, runtime, memory) belong in workflow/profiles/slurm/config.yaml, whose set-resources override these.
# The job runs with the whole validated config of this workflow (`flb job --config-json`, one shell-quoted JSON
# word): every key the user set (checkpoint_every, train_exec, train_chunk, ...) reaches it as typed. It is part of
# the shell line, not a params entry, so a config change alone does not re-run finished jobs; the rule's shell
# template keeps its text (`{JOB_SETS}`), so outputs made before this change are not re-run either (code trigger).
JOB_SETS = "--config-json " + wf.job_config_arg(config)


def _per_job(cls, fn):
    """A resource callable of the rule: ``fn`` of the job the wildcards name."""
    return lambda wildcards: fn(cls.from_wildcards(wildcards))


def plugin_job_resources(cls):
    """The rule resources a plug-in job class declares in ``RESOURCES`` (none when it declares none); a GPU job
    also asks for its share of the GPU (``gpu_slots``, benchmark/gpu_slots.py)."""
    res = {k: _per_job(cls, v) if callable(v) else v for k, v in getattr(cls, "RESOURCES", {}).items()}
    if "gpu" in res:
        res["gpu_slots"] = _per_job(cls, lambda job: job_gpu_slots(job, config.get("device")))
    return res


def plugin_job_threads(cls):
    """The rule's threads: what the job class's ``threads(config)`` asks for (a pfl training's client processes,
    ``pfl_client_procs``), else 1."""
    if not hasattr(cls, "threads"):
        return 1
    return _per_job(cls, lambda job: job.threads(config))


for _kind, _cls in wf.plugin_job_types().items():
    rule:
        name: f"job_{_kind}"
        input: wf.plugin_job_inputs(_cls)
        output: _cls.PATTERN
        log: "results/logs/jobs/" + _cls.PATTERN.removeprefix("results/") + ".log"
        conda: CONDA_ENV
        threads: plugin_job_threads(_cls)
        resources: **plugin_job_resources(_cls)
        params:
            job=wf.plugin_job_arg(_cls),
        shell: "{PY} job {params.job} {JOB_SETS} 2> {log}"
