"""The workflow's jobs as typed values: each knows its output path, its input jobs, how to rebuild itself from
Snakemake wildcards, and how to run in this process.

A job's output path is its ``PATTERN`` (a Snakemake output pattern whose wildcards are the job's fields)
formatted with the job's fields, so the Snakefile rules and the planner share one template per job type and
nothing ever parses a path back. Plans are written as JSON (:func:`job_to_dict` / :func:`job_from_dict`,
tagged by ``kind``); a runner plug-in (:mod:`benchmark.runners`) adds its own job types with
:func:`register_job`.

File layout under ``results/`` (the patterns below):

* ``features/<dataset>/<backbone>-<weights>/<preprocess>-<precision>/<subset>/<split>.json`` - feature pointer;
* ``partitions/<dataset>/<subset>/<partition tag>/seed<k>.json`` - client index arrays and the data they index;
* ``runs/closed_form/<features>/<partition tag>/<protocol>/seed<k>.csv`` - one closed-form job's tidy rows;
* ``runs/fl/<features>/<partition tag>/<fl protocol>/<method>/seed<k>.csv`` (and ``.curve.csv``) - one
  federated training run on cached features.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from benchmark.errors import ConfigError
from benchmark.suggest import did_you_mean

J = TypeVar("J", bound="Job")

#: Job kind -> job class (filled by :func:`register_job`).
JOB_KINDS: dict[str, type[Job]] = {}


def register_job(cls: type[J]) -> type[J]:
    """Class decorator: make a job type known to plan files (``kind`` tag) and to :func:`job_from_dict`."""
    if cls.KIND in JOB_KINDS and JOB_KINDS[cls.KIND] is not cls:
        raise ConfigError(f"job kind {cls.KIND!r} is registered twice", "give the new job type another KIND")
    JOB_KINDS[cls.KIND] = cls
    return cls


@dataclass(frozen=True)
class Job:
    """Base of every job: ``KIND`` names the type in plan files, ``PATTERN`` is its output path template."""

    KIND: ClassVar[str] = ""
    PATTERN: ClassVar[str] = ""
    #: Numerics version of this job kind: bump it when a change alters the numbers the job produces; recorded
    #: runs (:mod:`benchmark.ledger`) made with another version are stale.
    NUMERICS: ClassVar[int] = 1

    @property
    def path(self) -> str:
        """The output file (Snakemake's ``output``)."""
        return self.PATTERN.format(**dataclasses.asdict(self))

    def inputs(self) -> tuple[Job, ...]:
        """The jobs whose outputs this job reads."""
        return ()

    def checkpoint_file(self) -> Path | None:
        """Where the job checkpoints while it runs (training jobs; :func:`checkpoint_for`), else None."""
        return None

    def execute(self, config: Mapping[str, Any]) -> None:  # pragma: no cover - each type overrides it
        """Produce :attr:`path` in this process (``flb run``: no Snakemake)."""
        raise ConfigError(f"no in-process executor for {self.KIND} jobs", "run it with snakemake")

    @classmethod
    def from_wildcards(cls: type[J], wildcards: Any) -> J:
        """The job whose output Snakemake matched (``wildcards`` carry the job's fields by name)."""
        values = {}
        for f in dataclasses.fields(cls):
            raw = wildcards[f.name] if isinstance(wildcards, Mapping) else getattr(wildcards, f.name)
            kind = _WILDCARD_TYPES.get(f.type if isinstance(f.type, str) else f.type.__name__, str)
            values[f.name] = kind(raw)
        return cls(**values)


def checkpoint_for(output: str, suffix: str = ".pt") -> Path:
    """The checkpoint of the training job writing ``output``: the same path under ``results/checkpoints/``
    (outside the outputs, so a killed job leaves no output behind), its extension replaced by ``suffix``."""
    return Path("results/checkpoints/" + output.removeprefix("results/").removesuffix(Path(output).suffix) + suffix)


#: How a wildcard (a string) becomes a job field of each type.
_WILDCARD_TYPES: dict[str, type] = {"int": int, "float": float, "str": str}


def job_to_dict(job: Job) -> dict[str, Any]:
    return {"kind": job.KIND, **dataclasses.asdict(job)}


#: Field types a job JSON is checked against (the annotations of the job dataclasses).
_FIELD_TYPES: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


def job_fields(cls: type[Job]) -> dict[str, str]:
    """``{field: type name}`` of job type ``cls``, in declaration order."""
    return {f.name: f.type if isinstance(f.type, str) else f.type.__name__ for f in dataclasses.fields(cls)}


def job_from_dict(raw: Any) -> Job:
    """Inverse of :func:`job_to_dict` (a plan file's job, or ``flb job '<json>'``). An unknown kind, an unknown,
    missing or ill-typed field is one :class:`ConfigError` naming the job kind, the field(s) and the valid
    fields (never a ``TypeError``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a job must be a JSON object, got {type(raw).__name__}", 'e.g. {"kind": "partition", ...}')
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in JOB_KINDS:
        near = did_you_mean(str(kind), JOB_KINDS)
        raise ConfigError(
            f"unknown job kind {kind!r}",
            f"{near + ' ' if near else ''}use one of: {', '.join(sorted(JOB_KINDS))} (a plan file: re-plan the target)",
        )
    cls = JOB_KINDS[kind]
    fields = job_fields(cls)
    valid = f"fields of a {kind} job: " + ", ".join(f"{n} ({t})" for n, t in fields.items())
    given = {k: v for k, v in raw.items() if k != "kind"}
    unknown = [k for k in given if k not in fields]
    if unknown:
        near = did_you_mean(str(unknown[0]), fields)
        raise ConfigError(f"{kind} job: unknown field(s) {', '.join(map(repr, unknown))}", f"{near + ' ' if near else ''}{valid}")
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]  # fmt: skip
    missing = [n for n in required if n not in given]
    if missing:
        raise ConfigError(f"{kind} job: missing field(s) {', '.join(missing)}", valid)
    for name, value in given.items():
        want = _FIELD_TYPES.get(fields[name])
        if want is not None and (isinstance(value, bool) is not (want is bool) or not isinstance(value, want)):
            raise ConfigError(
                f"{kind} job: field {name}={value!r} is not of type {fields[name]}", valid
            )
    return cls(**given)


def job_closure(jobs: Iterable[Job]) -> list[Job]:
    """``jobs`` and every job they read, recursively, each once, every job after its inputs."""
    seen: dict[str, Job] = {}

    def visit(job: Job) -> None:
        if job.path in seen:
            return
        for dep in job.inputs():
            visit(dep)
        seen[job.path] = job

    for job in jobs:
        visit(job)
    return list(seen.values())


def run_jobs(jobs: list[Job], config: Mapping[str, Any], run: Callable[[Job], None] | None = None) -> None:
    """Run ``jobs`` and their inputs in this process, inputs first; existing outputs are kept (as Snakemake
    keeps them), and a job whose output a record of the ledger filled (``<output>.recorded``) needs no inputs."""
    seen: set[str] = set()

    def visit(job: Job) -> None:
        if job.path in seen:
            return
        seen.add(job.path)
        if Path(job.path + ".recorded").is_file() and Path(job.path).exists():
            return  # filled from the ledger of recorded runs (benchmark.ledger): its inputs are not needed
        for dep in job.inputs():
            visit(dep)
        if not Path(job.path).exists():
            (run or (lambda j: j.execute(config)))(job)

    for job in jobs:
        visit(job)


def partition_tag(part: Mapping[str, Any]) -> str:
    """``{scheme: dirichlet, alpha: 0.1, clients: 100}`` -> ``dirichlet-alpha0.1-clients100`` (sorted keys)."""
    extras = "".join(f"-{k}{part[k]}" for k in sorted(part) if k != "scheme")
    return f"{part['scheme']}{extras}"


def parse_partition_tag(tag: str) -> tuple[str, dict[str, Any]]:
    """Inverse of :func:`partition_tag` (values parsed as int, then float, else kept as text)."""
    scheme, *rest = tag.split("-")
    params: dict[str, Any] = {}
    for item in rest:
        key = item.rstrip("0123456789.e")
        raw = item[len(key) :]
        if not key or not raw:
            raise ConfigError(
                f"cannot parse partition parameter {item!r} in {tag!r}", "use <name><value> items"
            )
        params[key] = int(raw) if raw.isdigit() else float(raw)
    return scheme, params


@register_job
@dataclass(frozen=True)
class ExtractJob(Job):
    """Features of one dataset split (``flb extract``): a pointer JSON into the feature cache."""

    KIND: ClassVar[str] = "extract"
    PATTERN: ClassVar[str] = (
        "results/features/{dataset}/{backbone}-{weights}/{preprocess}-{precision}/{subset}/{split}.json"
    )
    dataset: str
    backbone: str
    weights: str
    preprocess: str
    precision: str
    subset: str
    split: str

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark import pipeline  # local: heavy import (pandas, scipy, torch, torchvision)

        pipeline.extract_step(
            dataset=self.dataset, split=self.split, backbone=self.backbone, weights=self.weights,
            preprocess=self.preprocess, precision=self.precision, subset=self.subset, out=self.path,
            batch_size=config.get("batch_size", "auto"), device=config.get("device"),
            data_root=config.get("data_root"), weights_dir=config.get("weights_dir"),
            cache_dir=config.get("cache_dir"),
        )  # fmt: skip


@register_job
@dataclass(frozen=True)
class PartitionJob(Job):
    """Client index arrays of one dataset's train split (``flb partition``)."""

    KIND: ClassVar[str] = "partition"
    PATTERN: ClassVar[str] = "results/partitions/{dataset}/{subset}/{ptag}/seed{seed}.json"
    dataset: str
    subset: str
    ptag: str  # partition_tag() of the scheme and its parameters
    seed: int

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark import pipeline  # local: heavy import (pandas, scipy, torch, torchvision)

        scheme, params = parse_partition_tag(self.ptag)
        pipeline.partition_step(
            dataset=self.dataset, subset=self.subset, scheme=scheme, seed=self.seed, out=self.path,
            params=params, data_root=config.get("data_root"),
        )  # fmt: skip


@dataclass(frozen=True)
class _OnFeatures(Job):
    """A run on one (features, partition, seed): the fields every run on cached features shares."""

    dataset: str
    model: str
    weights: str
    preprocess: str
    precision: str
    subset: str
    ptag: str

    def features(self, split: str) -> ExtractJob:
        """The features of ``split`` this run reads: a ``@seedflip`` preprocessing (frozen flips keyed by the run
        seed, issue 26) reads the train features of its own seed (``@flip<seed>``) and the shared test features."""
        from benchmark.features.preprocess import PreprocessName  # local: heavy import (torch)

        pre = PreprocessName.parse(self.preprocess).for_split(split, self.seed)  # type: ignore[attr-defined]
        return ExtractJob(self.dataset, self.model, self.weights, pre, self.precision, self.subset, split)

    def partition(self) -> PartitionJob:
        return PartitionJob(self.dataset, self.subset, self.ptag, self.seed)  # type: ignore[attr-defined]

    def inputs(self) -> tuple[Job, ...]:
        return (self.features("train"), self.features("test"), self.partition())


_RUNS = "results/runs/{kind}/{dataset}/{model}-{weights}/{preprocess}-{precision}/{subset}/{ptag}"


@register_job
@dataclass(frozen=True)
class ClosedFormJob(_OnFeatures):
    """Tidy rows of every method of a closed-form ``protocol`` for one (features, partition, seed); the
    protocol is a path component, so two papers' runs on the same features never share a file."""

    KIND: ClassVar[str] = "closed_form"
    PATTERN: ClassVar[str] = _RUNS.replace("{kind}", "closed_form") + "/{protocol}/seed{seed}.csv"
    #: 2 (issue 26): protocol legate2023-code draws FedNCM's random bias from the run seed's fedncm_bias stream
    #: (it used the bare run seed), so its runs under the same path changed. Runs with the new flip_stream
    #: default have their own paths (``@seedflip``); the other protocols' numbers are unchanged.
    NUMERICS: ClassVar[int] = 2
    protocol: str
    seed: int

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark import pipeline  # local: heavy import (pandas, scipy, torch, torchvision)

        pipeline.closed_form_step(
            train=self.features("train").path, test=self.features("test").path,
            partition=self.partition().path, out=self.path, protocol=self.protocol,
        )  # fmt: skip


@register_job
@dataclass(frozen=True)
class FLRunJob(_OnFeatures):
    """One federated training run on cached features (``flb fl-run``); its per-round curve is
    :attr:`curve_path`."""

    KIND: ClassVar[str] = "fl_run"
    PATTERN: ClassVar[str] = _RUNS.replace("{kind}", "fl") + "/{protocol}/{method}/seed{seed}.csv"
    protocol: str  # training protocol of benchmark/fl/protocols.py
    method: str
    seed: int

    @property
    def curve_path(self) -> str:
        return self.path.removesuffix(".csv") + ".curve.csv"

    def execute(self, config: Mapping[str, Any]) -> None:
        from benchmark.fl.jobs import fl_run_step  # local: heavy import (pandas, scipy, torch, torchvision)

        fl_run_step(
            protocol=self.protocol, method=self.method, train=self.features("train").path,
            test=self.features("test").path, partition=self.partition().path, seed=self.seed, out=self.path,
            curve=self.curve_path, device=config.get("device") or "auto",
        )  # fmt: skip
