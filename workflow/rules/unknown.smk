# Last rule: a requested name that no other rule produces (no folder, no suffix) ends here: one line with the
# closest target names and how to list them all (exit 2, no traceback); Snakemake's own "No rule to produce X"
# names none.
rule unknown_target:
    output: "{name}"
    wildcard_constraints:
        name=r"[^/.]+",
    input: wf.one_line_errors(lambda w: wf.unknown_target(w.name, [r.name for r in workflow.rules if not r.has_wildcards()]))
