"""The ledger of recorded runs: the output of one planned job, kept in the repository with its provenance, and
used by a build instead of running the job again.

A **recorded run** is one folder ``runs/<job kind>/<id>/`` where ``<id>`` is the first 16 hex digits of the
sha256 of the job's canonical identity (its kind and fields as in plan files, :func:`benchmark.jobs.job_to_dict`;
the job's output path is a function of the same fields). It holds

* ``record.json`` (with its ``.sha256`` sidecar): the job, the **numerics version** of its job kind when it ran
  (``Job.NUMERICS``), the inputs it read (dataset and weights checksums, as the job's own output states them),
  the provenance (:class:`Provenance`: code commit, machine, versions, device, threads, precision, start and
  end, wall time, the command, where the files came from, notes) and the sha256 and size of every file;
* ``files/``: the job's output files under their path in a results tree (``results/runs/...``): metrics,
  histories, per-client accuracies and their checksum sidecars; **never weights** (``.pt``, ``.safetensors``,
  ...), which stay where they were produced.

Every file is checked against ``record.json`` before a record is used (:func:`read_record`); a record whose
numerics version differs from the code's is **stale** (:attr:`RunRecord.stale`): it is listed and shown beside
the cells it would fill, never used and never counted. A build **materialises** a usable record (copies its
files to the job's output paths, :func:`materialise`) and marks them with ``<output>.recorded`` so that the
tables say where a cell came from, and so that ``use_records=false`` can take them away again
(:func:`unmaterialise`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark import jobs as registry
from benchmark.errors import ConfigError, CorruptFileError
from benchmark.io import atomic_write_json, atomic_write_text, read_verified_json, sha256_bytes, sha256_file
from benchmark.jobs import Job, job_closure, job_from_dict, job_to_dict
from benchmark.peers import job as _peer_job  # noqa: F401 - registers the ``peer`` job kind of recorded comparisons
from benchmark.runners import load_runners

#: The ledger folder, relative to the checkout.
LEDGER_DIR = Path("runs")
#: Version of the record layout.
FORMAT = 1
#: Files never kept in the ledger (model weights and checkpoints).
WEIGHT_SUFFIXES = (".pt", ".pth", ".safetensors", ".ckpt", ".bin", ".npz")
#: The marker beside a materialised output: ``<output>.recorded`` holds the record's folder.
MARKER_SUFFIX = ".recorded"


class RecordExistsError(ConfigError):
    """Another run of the same job is already recorded (``--replace`` records this one instead)."""


def numerics_version(kind: str) -> int:
    """The numerics version of job kind ``kind`` in this code (``Job.NUMERICS``; bump it when a change alters
    the numbers the job produces: records made before are then stale)."""
    cls = registry.JOB_KINDS.get(kind)
    if cls is None:
        _load_kinds()
        cls = registry.JOB_KINDS.get(kind)
    return int(getattr(cls, "NUMERICS", 1)) if cls is not None else 0


def _load_kinds() -> None:
    load_runners()


def job_identity(job: Job) -> dict[str, Any]:
    """The canonical identity of ``job``: its kind and fields (sorted keys)."""
    return json.loads(json.dumps(job_to_dict(job), sort_keys=True))


def record_id(job: Job) -> str:
    return sha256_bytes(json.dumps(job_identity(job), sort_keys=True).encode())[:16]


def record_folder(job: Job, ledger: Path = LEDGER_DIR) -> Path:
    return Path(ledger) / job.KIND / record_id(job)


def job_outputs(job: Job, root: Path = Path(".")) -> list[str]:
    """The files ``job`` wrote under ``root``: its output and, beside it, the files named ``<stem>.<...>`` (curve,
    checksum sidecars), weights excluded; paths relative to ``root``, sorted."""
    main = Path(job.path)
    stem = main.name.rsplit(".", 1)[0]
    folder = root / main.parent
    if not (root / main).is_file():
        return []
    out = []
    for p in folder.iterdir():
        if not p.is_file() or p.name.endswith(MARKER_SUFFIX) or p.name.endswith(".tmp"):
            continue
        if p.name == main.name or p.name.startswith(stem + ".") or p.name == main.name + ".sha256":
            if not p.name.endswith(WEIGHT_SUFFIXES):
                out.append(str(main.parent / p.name))
    return sorted(out)


def weight_files(job: Job, root: Path = Path(".")) -> list[str]:
    """The weight files beside ``job``'s output under ``root`` (``<stem>.<...>`` ending in a
    :data:`WEIGHT_SUFFIXES`: a training's selected model), which the ledger does not keep; paths relative to
    ``root``, sorted. A record of ``job`` with these on disk can fill it for a dependant that reads them."""
    main = Path(job.path)
    stem, folder = main.name.rsplit(".", 1)[0], root / main.parent
    if not folder.is_dir():
        return []
    return sorted(str(main.parent / p.name) for p in folder.iterdir()
                  if p.is_file() and p.name.startswith(stem + ".") and p.name.endswith(WEIGHT_SUFFIXES))  # fmt: skip


@dataclass(frozen=True)
class Provenance:
    """Where, when and how a recorded run was made."""

    code_commit: str  # the commit whose code ran (``+dirty``: with uncommitted changes)
    machine: str  # CPU model and extensions, GPU name
    versions: str  # python, torch, CUDA, ... (``benchmark.provenance.package_versions``)
    device: str = ""  # the device the job computed on (``cpu``, ``cuda``)
    threads: int | None = None
    precision: str = ""  # fp32, fp32 without TF32, bf16, ...
    start: str = ""  # ISO 8601, UTC
    end: str = ""
    wall_s: float | None = None
    command: str = ""
    source: str = ""  # where the files were imported from
    reported_commit: str = ""  # the commit the run's own files name, where it differs from ``code_commit``
    notes: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()  # what every verdict from this record must say (shown with it in the tables)
    estimate_s: float | None = None  # the harvester's estimate of this job before it ran (calibrated), beside wall_s

    @property
    def date(self) -> str:
        return (self.end or self.start)[:10]


@dataclass(frozen=True)
class RunRecord:
    """One recorded run (module docstring)."""

    job: Job
    numerics: int
    provenance: Provenance
    files: Mapping[str, Mapping[str, Any]]  # path -> {"sha256", "bytes"}
    inputs: Mapping[str, Any] = field(default_factory=dict)
    folder: Path = Path()

    @property
    def id(self) -> str:
        return record_id(self.job)

    @property
    def current_numerics(self) -> int:
        return numerics_version(self.job.KIND)

    @property
    def stale(self) -> bool:
        return self.numerics != self.current_numerics

    def label(self) -> str:
        """One line for tables: ``recorded 2026-11-25 on <machine>, commit <sha8>``."""
        p = self.provenance
        text = f"recorded {p.date} on {short_machine(p.machine)}, commit {p.code_commit[:8]}"
        text += "".join(f"; {c}" for c in p.caveats)
        if self.stale:
            text += f"; STALE: numerics v{self.numerics}, the code is v{self.current_numerics}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "id": self.id, "job": job_identity(self.job), "numerics": self.numerics,
                "inputs": dict(self.inputs), "provenance": {**dataclasses.asdict(self.provenance),
                                                            "notes": list(self.provenance.notes),
                                                            "caveats": list(self.provenance.caveats)},
                "files": {k: dict(v) for k, v in sorted(self.files.items())}}  # fmt: skip


def short_machine(machine: str) -> str:
    """The GPU name if the machine has one, else its CPU model (``x86_64 16 cpu (Intel Xeon; ...); NVIDIA H200``
    -> ``NVIDIA H200``)."""
    if ";" in machine and ")" in machine:
        tail = machine.rsplit(")", 1)[-1].strip("; ")
        if tail:
            return tail
    if "(" in machine:
        return machine.split("(", 1)[1].split(";", 1)[0].rstrip(")")
    return machine


# ------------------------------------------------------------------------------------------------ writing
def write_record(job: Job, provenance: Provenance, *, root: Path = Path("."), ledger: Path = LEDGER_DIR,
                 inputs: Mapping[str, Any] | None = None, replace: bool = False) -> RunRecord:  # fmt: skip
    """Record the outputs of ``job`` found under ``root`` (:func:`job_outputs`) in ``ledger``. The files are
    copied first, ``record.json`` is written last (a record without it does not exist). An existing record
    with other files is kept unless ``replace``."""
    files = job_outputs(job, root)
    if not files:
        raise ConfigError(f"{root / job.path} does not exist: nothing to record", "run the job first")
    folder = record_folder(job, ledger)
    sums = {f: {"sha256": sha256_file(root / f), "bytes": (root / f).stat().st_size} for f in files}
    if (folder / "record.json").is_file():
        old = read_record(folder)
        if dict(old.files) == sums and old.numerics == numerics_version(job.KIND):
            return old
        if not replace:
            raise RecordExistsError(
                f"{folder} already records {job.path} ({old.label()}) with other files",
                "keep it, or pass --replace to record this run instead",
            )
        shutil.rmtree(folder)
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for f in files:
        dest = staging / "files" / f
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / f, dest)
    record = RunRecord(job, numerics_version(job.KIND), provenance, sums, dict(inputs or {}), folder)
    atomic_write_json(staging / "record.json", record.to_dict(), checksum=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staging, folder)
    return dataclasses.replace(record, folder=folder)


# ------------------------------------------------------------------------------------------------ reading
def read_record(folder: Path, *, verify: bool = True) -> RunRecord:
    """The record in ``folder``, its ``record.json`` checked against its sidecar and (``verify``) every file
    against ``record.json``: a mismatch is one :class:`CorruptFileError` naming the file."""
    folder = Path(folder)
    fix = f"restore {folder} from git (git checkout -- {folder}) or delete it and import the run again"
    raw = read_verified_json(folder / "record.json", fix=fix)
    try:
        job = job_from_dict(raw["job"])
        prov = raw["provenance"]
        provenance = Provenance(**{**prov, "notes": tuple(prov.get("notes", ())),
                                   "caveats": tuple(prov.get("caveats", ()))})
        record = RunRecord(job, int(raw["numerics"]), provenance, raw["files"], raw.get("inputs", {}), folder)
    except ConfigError:
        _load_kinds()
        job = job_from_dict(raw["job"])
        prov = raw["provenance"]
        provenance = Provenance(**{**prov, "notes": tuple(prov.get("notes", ())),
                                   "caveats": tuple(prov.get("caveats", ()))})
        record = RunRecord(job, int(raw["numerics"]), provenance, raw["files"], raw.get("inputs", {}), folder)
    except (KeyError, TypeError) as exc:
        raise CorruptFileError(f"{folder / 'record.json'} is not a run record ({exc})", fix) from None
    if record.id != folder.name:
        raise CorruptFileError(f"{folder}: the record's job has id {record.id}, not the folder's name", fix)
    if verify:
        for rel, meta in record.files.items():
            path = folder / "files" / rel
            if not path.is_file():
                raise CorruptFileError(f"{path} (listed in {folder / 'record.json'}) is missing", fix)
            if sha256_file(path) != meta["sha256"]:
                raise CorruptFileError(f"{path} does not match its sha256 in {folder / 'record.json'}", fix)
    return record


def record_folders(ledger: Path = LEDGER_DIR) -> list[Path]:
    ledger = Path(ledger)
    if not ledger.is_dir():
        return []
    return sorted(p.parent for p in ledger.glob("*/*/record.json"))


def load_ledger(ledger: Path = LEDGER_DIR, *, verify: bool = True) -> dict[str, RunRecord]:
    """Every record of ``ledger`` by its job's output path."""
    return {r.job.path: r for r in (read_record(f, verify=verify) for f in record_folders(ledger))}


# ------------------------------------------------------------------------------------------ materialising
def marker_path(output: str | Path) -> Path:
    p = Path(output)
    return p.with_name(p.name + MARKER_SUFFIX)


def materialise(record: RunRecord, root: Path = Path(".")) -> list[Path]:
    """Copy the record's files to their paths under ``root`` and mark the job's output as recorded. Files are
    written in the record's order with the job's own output last, so a reader never sees an output without its
    curve or sidecar."""
    if record.stale:
        raise ConfigError(f"{record.folder} is stale ({record.label()})", "re-run the job; a stale record is not used")
    main = record.job.path
    written = []
    for rel in sorted(record.files, key=lambda f: (f == main, f)):
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.recorded-tmp")
        shutil.copyfile(record.folder / "files" / rel, tmp)
        os.replace(tmp, dest)
        written.append(dest)
    atomic_write_text(root / marker_path(main), str(record.folder) + "\n")
    return written


def materialised_from(output: str | Path, root: Path = Path(".")) -> str | None:
    """The record folder ``output`` was materialised from (None: computed here, or absent)."""
    m = root / marker_path(output)
    try:
        return m.read_text().strip() or None
    except FileNotFoundError:
        return None


def unmaterialise(job: Job, root: Path = Path(".")) -> bool:
    """Remove the files a record put at ``job``'s paths (``use_records=false``); ``False`` when ``job``'s
    output was not materialised from a record."""
    if materialised_from(job.path, root) is None:
        return False
    for rel in job_outputs(job, root):
        (root / rel).unlink(missing_ok=True)
    (root / marker_path(job.path)).unlink(missing_ok=True)
    return True


def verify_all(ledger: Path = LEDGER_DIR) -> tuple[list[RunRecord], list[str]]:
    """Every record checked: the good ones and one line per damaged record."""
    good, bad = [], []
    for folder in record_folders(ledger):
        try:
            good.append(read_record(folder))
        except (CorruptFileError, ConfigError) as exc:
            bad.append(str(exc))
    return good, bad


def records_for(jobs: Iterable[Job], ledger: Mapping[str, RunRecord]) -> list[RunRecord]:
    return [ledger[j.path] for j in jobs if j.path in ledger]


# ------------------------------------------------------------------------------------------- use in a plan
_CACHE: dict[tuple[str, tuple[str, ...]], dict[str, RunRecord]] = {}


def checkout_ledger() -> Path:
    """The ledger of the checkout this package is in (``<checkout>/runs``), wherever the build runs."""
    return Path(__file__).resolve().parents[1] / LEDGER_DIR


def usable_records(config: Mapping[str, Any], ledger: Path | None = None) -> dict[str, RunRecord]:
    """The verified, non-stale records by output path, or ``{}`` with ``use_records: false``. Read once per
    process and ledger content (a damaged record is an error: it is never skipped silently)."""
    if config.get("use_records") is False:
        return {}
    ledger = checkout_ledger() if ledger is None else Path(ledger)
    key = (str(ledger.resolve()), tuple(str(f) for f in record_folders(ledger)))
    if key not in _CACHE:
        _CACHE[key] = load_ledger(ledger)
    return {p: r for p, r in _CACHE[key].items() if not r.stale}


def all_recorded(jobs: Iterable[Job], config: Mapping[str, Any], ledger: Path | None = None) -> bool:
    """Whether every job of ``jobs`` and of their inputs has a usable record: then the cells they fill need
    no training on this machine (a runner plans them even where training is not allowed)."""
    jobs = list(jobs)
    records = usable_records(config, ledger)
    return bool(jobs) and all(j.path in records for j in job_closure(jobs))

