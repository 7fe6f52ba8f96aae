"""Re-assemble CI-tier targets from a copy of a CI build's run files ($SCRATCH, copied from $SCRATCH) with
this worktree's code: flip_stream fixed (so the closed-form run paths are the build's), fl_report_round as given."""
import json, sys, yaml
from pathlib import Path
from benchmark.tables.plan import make_plan, write_plan
from benchmark.tables.assemble import build_table
import benchmark.runners  # noqa: F401
rr = sys.argv[1]
cfg = yaml.safe_load(open("config/config.yaml"))
cfg.update(tier="ci", data_root="$FLB_DATA_ROOT", weights_dir="$FLB_WEIGHTS_DIR", flip_stream="fixed", fl_report_round=rr, use_records=False)
out = {}
for t in sys.argv[2:]:
    p = make_plan(t, cfg)
    write_plan(p, Path("results"))
    rep = build_table(t, Path("results"))
    for o in rep.outcomes:
        if o.plan.cell.id.startswith("cifar10/lp"):
            out[f"{t}#{o.plan.cell.id}"] = (str(o.verdict.status), getattr(o.verdict, "ours_mean", None))
    d = json.load(open(f"results/checks/{t}.json"))
    for c in d["cells"]:
        if c["cell"].startswith("cifar10/lp"):
            out[f"{t}#{c['cell']}"] = (c["verdict"], c["ours"], c["ours_mean"], c["ours_std"], c["delta"])
print(json.dumps(out, indent=1))
