"""Measured gain of sharing one GPU between several training jobs (issue 28: "several small training jobs share
one GPU when memory allows (a gpu_slots-style resource, measured aggregate gain)").

The suite's GPU rules ask for ``gpu: 1`` and the local profile offers ``gpu=1``: one GPU job at a time. Passing
``--resources gpu=K`` to snakemake (or ``flb harvest --workers K``) runs K of them on the one GPU at once. Whether
that pays depends on the job: a 4convNet round at batch 50 leaves most of an H100 idle, a SqueezeNet FT round at
224 px keeps it busy. This tool measures it for a given command, the way the jobs would share the GPU: K copies
of the same command started together, each doing the same fixed work, against one copy alone::

    python tools/gpu_share_bench.py --out DIR --copies 1,2,4 -- \\
        python tools/fl_train_bench.py --out {out} --modes loop --precisions fp32 --rounds 4 --no-check
    python tools/gpu_share_bench.py --out DIR --copies 1,2,4,8 -- \\
        python tools/pfl_bench.py --out {out} --model 4convnet --modes loop --rounds 4 --no-check

``{out}`` in the command becomes each copy's own folder (``DIR/copies-K/copy-i``). For each K it records the
wall time of the whole batch (start of the first copy to the end of the last), every copy's return code and
wall time, and ``gain``: K x wall(1) / wall(K), the aggregate throughput of K jobs at once relative to the same
jobs one after another (1.0: sharing buys nothing; K: perfect overlap). The whole command is timed, start-up and
warm-up included, as a job of the workflow would be. JSON: ``DIR/gpu_share_bench.json`` with the machine
(:mod:`benchmark.timing`). Needs only the standard library and the package's provenance helpers; on a CPU it
runs too (the CI smoke test), where copies compete for the cores instead.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

try:
    from benchmark.provenance import git_commit, machine
except ModuleNotFoundError:  # a checkout without the package installed (a lent GPU machine): use it in place
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmark.provenance import git_commit, machine


@dataclass(frozen=True)
class Batch:
    """K copies started together: the batch's wall time and each copy's return code and wall time."""

    copies: int
    wall_s: float
    copy_wall_s: tuple[float, ...]
    returncodes: tuple[int, ...]

    @property
    def ok(self) -> bool:
        return all(rc == 0 for rc in self.returncodes)


def gain(single_wall_s: float, batch: Batch) -> float:
    """Aggregate throughput of ``batch`` relative to its copies run one after another: K x wall(1) / wall(K)."""
    return batch.copies * single_wall_s / batch.wall_s


def run_batch(command: Sequence[str], copies: int, out: Path) -> Batch:
    """Start ``copies`` copies of ``command`` at once (``{out}`` -> each copy's folder); wait for all."""
    procs = []
    logs = []
    t0 = time.perf_counter()
    for i in range(copies):
        folder = out / f"copies-{copies}" / f"copy-{i}"
        folder.mkdir(parents=True, exist_ok=True)
        log = (folder / "log.txt").open("w")
        logs.append(log)
        argv = [arg.replace("{out}", str(folder)) for arg in command]
        procs.append((subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT), time.perf_counter()))
    walls, rcs = [], []
    for proc, started in procs:
        rcs.append(proc.wait())
        walls.append(time.perf_counter() - started)
    wall = time.perf_counter() - t0
    for log in logs:
        log.close()
    return Batch(copies, wall, tuple(walls), tuple(rcs))


def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/gpu_share_bench.py`` (module docstring)."""
    ap = argparse.ArgumentParser(prog="python tools/gpu_share_bench.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gpu_share_bench.json and the copies' outputs")
    ap.add_argument("--copies", default="1,2,4", help="numbers of copies started together (1 is always run first)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the command of one job ({out}: its folder)")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the command of one job after --")
    try:
        counts = sorted({int(c) for c in args.copies.split(",") if c.strip()} | {1})
    except ValueError:
        ap.error(f"--copies must be comma-separated whole numbers, got {args.copies!r}")
    if counts[0] < 1:
        ap.error("--copies must be at least 1")
    try:  # the GPU's name in the machine line (benchmark.provenance.machine names it once torch is imported)
        import torch  # noqa: F401
    except ModuleNotFoundError:
        pass
    out = Path(args.out)
    batches: list[Batch] = []
    for k in counts:
        batch = run_batch(command, k, out)
        batches.append(batch)
        print(f"copies {k}: wall {batch.wall_s:.2f} s, return codes {list(batch.returncodes)}", flush=True)
        if not batch.ok:
            print(f"gpu_share_bench: a copy failed (logs under {out / f'copies-{k}'}); stopping", file=sys.stderr)
            break
    single = batches[0].wall_s
    rows: list[dict[str, Any]] = [
        {**asdict(b), "ok": b.ok, "gain": round(gain(single, b), 3) if b.ok and batches[0].ok else None}
        for b in batches
    ]
    doc = {
        "what": "K copies of one job started together vs one alone: gain = K x wall(1) / wall(K) "
        "(tools/gpu_share_bench.py)",
        "command": shlex.join(command),
        "machine": machine(),
        "git_commit": git_commit(),
        "results": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_share_bench.json").write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        print(f"copies {r['copies']:>3}  wall {r['wall_s']:8.2f} s  gain {r['gain']}")
    print(f"wrote {out / 'gpu_share_bench.json'}")
    return 0 if all(b.ok for b in batches) else 1


if __name__ == "__main__":
    sys.exit(main())
