# Last rule: a requested name that no other rule produces (no folder, no suffix) ends here, with the list of
# targets; Snakemake's own "No rule to produce X" does not list them.
rule unknown_target:
    output: "{name}"
    wildcard_constraints:
        name=r"[^/.]+",
    input: lambda w: wf.unknown_target(w.name, [r.name for r in workflow.rules if not r.has_wildcards()])
