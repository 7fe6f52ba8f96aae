# fl-pretrain-bench: the Snakemake workflow, run from the repository root (`snakemake --cores all table3`).
# The rules live in workflow/ (workflow/Snakefile and workflow/rules/*.smk; README.md and docs/architecture.md say
# what each target builds); this file only includes them. The default profile (rerun-incomplete) is
# workflow/profiles/default, found from here through profiles/default.
include: "workflow/Snakefile"
