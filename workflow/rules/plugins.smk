# Jobs of runner plug-ins (benchmark/runners/<name>.py): one rule per job type a plug-in registers that no rule
# above produces. The job rebuilds itself from the wildcards of its own output pattern and runs via `flb job`.
JOB_SETS = " ".join(
    f"--set {k}={config[k]}" for k in ("data_root", "weights_dir", "cache_dir", "device", "batch_size")
    if config.get(k)
)

for _kind, _cls in wf.plugin_job_types().items():
    rule:
        name: f"job_{_kind}"
        input: wf.plugin_job_inputs(_cls)
        output: _cls.PATTERN
        log: "results/logs/jobs/" + _cls.PATTERN.removeprefix("results/") + ".log"
        conda: CONDA_ENV
        params:
            job=wf.plugin_job_arg(_cls),
        shell: "{PY} job {params.job} {JOB_SETS} 2> {log}"
