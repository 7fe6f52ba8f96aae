"""Turn the real runs kept as prose and files under ``docs/runs/`` into recorded runs (``runs/``, issue 24).

Nothing is retyped: each file there is matched to the planned job whose configuration its own record states
(pfl: the training config and partition; zo: the run spec; centralised curves: the job fields), placed at that
job's output path in a scratch results tree and recorded by :func:`benchmark.ledger_import.import_results`.
The provenance comes from the files (machine, versions, commit, wall time); what the files do not hold is
taken from each folder's README and kept as a note: the commit whose code ran where the file names another,
the departures, and that the date is the day the files were committed (the runs' own start and end times were
not kept then).

    python tools/records_from_docs_runs.py [--ledger runs]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmark.ledger_import import ImportOptions, import_results, planned_jobs  # noqa: E402

DATE_NOTE = "date: the day these files were committed to docs/runs/ (the run's own start and end were not kept)"


def committed_at(path: Path) -> float:
    out = subprocess.run(["git", "log", "-1", "--format=%ct", "--", str(path)], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    return float(out)


def _config(**extra: Any) -> dict[str, Any]:
    from benchmark.workflow import load_config

    return load_config(None, {"cpu_training": True, "pfl_both_selections": False, **extra})


def _same(a: dict[str, Any], b: dict[str, Any], keys: tuple[str, ...]) -> bool:
    def norm(v: Any) -> Any:
        try:
            return float(v)
        except (TypeError, ValueError):
            return v

    return all(norm(a.get(k)) == norm(b.get(k)) for k in keys)


PFL_KEYS = ("dataset", "model", "algorithm", "clients", "participation", "local_epochs", "rounds", "momentum",
            "head_lr_ratio", "head_init", "bn", "selection", "seed", "lr", "batch_size")  # fmt: skip
ZO_KEYS = ("dataset", "encoder", "method", "alpha", "clients", "k_shot", "rounds", "lr", "eps", "num_z",
           "local_steps", "eval_every", "seed")  # fmt: skip


def _place(scratch: Path, job: Any, src: Path, manifest: list[dict[str, Any]], curve: Path | None = None) -> None:
    """Copy ``src`` (and its curve CSV) to ``job``'s output path under ``scratch``; list the job as done."""
    dest = scratch / job.path
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)
    if curve is not None:
        shutil.copyfile(curve, dest.with_suffix(".curve.csv"))
    manifest.append({"path": job.path, "status": "done", "end": committed_at(src)})


def stage_pfl(scratch: Path, jobs: list[Any], manifest: list[dict[str, Any]]) -> None:
    """docs/runs/fedbabu_cpu/<algorithm>/: the training records and their evaluations."""
    folder = ROOT / "docs/runs/fedbabu_cpu"
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        rec = json.loads((sub / "seed0.json").read_text())
        train = [j for j in jobs if j.KIND == "pfl_train" and _same(dataclasses.asdict(j.pfl_config({})), rec["config"], PFL_KEYS)
                 and j.partition() == {**rec["partition"], "server_fraction": float(rec["partition"].get("server_fraction", 0))}]  # fmt: skip
        if len(train) != 1:
            raise SystemExit(f"{sub}: {len(train)} planned pfl_train jobs match its record")
        job = train[0]
        _place(scratch, job, sub / "seed0.json", manifest, curve=sub / "seed0.curve.csv")
        for ev in [j for j in jobs if j.KIND == "pfl_eval" and j.training() == job]:
            if (sub / Path(ev.path).name).is_file():
                _place(scratch, ev, sub / Path(ev.path).name, manifest)


def stage_zo(scratch: Path, jobs: list[Any], manifest: list[dict[str, Any]]) -> None:
    """docs/runs/fedmezo_cpu/<run>/: zeroth-order and SLoRA runs."""
    for sub in sorted(p for p in (ROOT / "docs/runs/fedmezo_cpu").iterdir() if p.is_dir()):
        if sub.name.startswith(("fedmezo_", "distmezo_")):
            continue  # issue 26: their lr was chosen on training loss; replaced by the validated runs
        rec = json.loads((sub / "seed0.json").read_text())
        found = [j for j in jobs if j.KIND == "zo_train" and _same(dataclasses.asdict(j.run_spec()), rec["spec"], ZO_KEYS)]
        if len(found) != 1:
            raise SystemExit(f"{sub}: {len(found)} planned zo_train jobs match its spec")
        _place(scratch, found[0], sub / "seed0.json", manifest, curve=sub / "seed0.curve.csv")


def zo_figure_jobs() -> list[Any]:
    """bernier2024 Figs. 4.2 (10 rounds) and 4.3 (1,000 rounds) on SST-2, the budgets docs/runs/fedmezo_cpu ran."""
    from benchmark.figures.bernier2024_runs import figure_jobs

    base = dict(zo_k_shot=16, zo_lr=0.004, zo_figure_tasks=["sst2"])
    jobs = list(figure_jobs(_config(**base, zo_rounds=10, zo_eval_every=10), "bernier2024_fig4_2").values())
    jobs += figure_jobs(_config(**base, zo_rounds=1000, zo_eval_every=50), "bernier2024_fig4_3").values()
    return list({j.path: j for j in jobs}.values())


def central_jobs() -> list[Any]:
    from benchmark.figures.fedbabu_central import figure_jobs

    cfg = _config()
    jobs = [j for name in ("fedbabu_fig4", "fedbabu_fig5") for j in figure_jobs(cfg, name).values()]
    return list({j.path: j for j in jobs}.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ledger", default=str(ROOT / "runs"))
    args = ap.parse_args(argv)
    ledger = Path(args.ledger)
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        # fedbabu Tables 12-15 (issue 12): FedAvg and FedBABU, s=10, f=0.1, tau=10, model selection "best"
        scratch, manifest = Path(tmp) / "pfl", []
        jobs = planned_jobs([f"fedbabu_table1{k}" for k in (2, 3, 4, 5)], _config(pfl_selection="best"))
        stage_pfl(scratch, jobs, manifest)
        total += len(import_results(scratch, jobs, ImportOptions(
            commit="2a49af4", source="docs/runs/fedbabu_cpu (issue 12)", manifest={"jobs": manifest},
            notes=("full protocol on 2 cores of an AMD EPYC, one torch thread per run, two runs side by side "
                   "beside other work: wall times are upper bounds",
                   "the code loaded when the runs started was 2a49af4; the record names 228b240, the HEAD when "
                   "it was written",
                   "the curve CSV was rewritten afterwards from the record's history into the tables' curve "
                   "format; nothing else was touched", DATE_NOTE)), ledger))  # fmt: skip
        # bernier2024 Table 4.1 (issue 13): FedMeZO / SLoRA on SST-2 (and SLoRA on SST-5), k-shot 16
        scratch, manifest = Path(tmp) / "zo", []
        cfg = _config(zo_k_shot=16, zo_lr=0.004, zo_rounds=1000, zo_eval_every=50)
        jobs = list({j.path: j for j in planned_jobs(["bernier2024_table4_1"], cfg) + zo_figure_jobs()}.values())
        stage_zo(scratch, jobs, manifest)
        total += len(import_results(scratch, jobs, ImportOptions(
            source="docs/runs/fedmezo_cpu (issue 13)", manifest={"jobs": manifest},
            caveats=("learning rate chosen on training loss, not on a validation split (to be replaced)",),
            notes=("the learning rate (4e-3 FedMeZO, 1e-3 SLoRA) was chosen on TRAINING loss, not on a "
                   "validation split: a later issue replaces these records",
                   "substitute encoder all-MiniLM-L6-v2, SST k-shot 16 and 1,000 of the printed 2,621 rounds: "
                   "departures the cells name", "one torch thread on a shared 2-core AMD EPYC: wall times are "
                   "upper bounds", DATE_NOTE)), ledger))  # fmt: skip
        # fedbabu Figs. 4-5 (issue 14): the centralised curves, on a lent H100
    total += len(import_results(ROOT / "docs/runs/fedbabu_central_gpu", central_jobs(), ImportOptions(
        commit="1953c92", source="docs/runs/fedbabu_central_gpu (issue 14), a lent NVIDIA H100",
        manifest={"jobs": [{"path": j.path, "status": "done", "end": committed_at(
            ROOT / "docs/runs/fedbabu_central_gpu" / j.path)} for j in central_jobs()
            if (ROOT / "docs/runs/fedbabu_central_gpu" / j.path).is_file()]},
        notes=("the working tree of commit 1953c92 (branch issue14) ran; the records say 1452914+dirty: the "
               "device copy's .git pointed at main", "five runs at once on the one GPU; TF32 convolutions on "
               "(PyTorch's default)", DATE_NOTE)), ledger))  # fmt: skip
    print(f"{total} records in {ledger}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
