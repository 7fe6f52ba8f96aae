"""The steps the Snakemake rules call (through :mod:`benchmark.cli`): extract -> partition -> methods -> collect.

Each step reads and writes small JSON/CSV files so that Snakemake can track them; the heavy arrays live in
the content-addressed feature cache, referenced by a *pointer* JSON (cache key digest, file, sha256).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmark.closed_form import run_methods
from benchmark.closed_form.protocols import ALL_METHODS, merge_options, protocol_methods, protocol_options
from benchmark.closed_form.registry import get_method
from benchmark.data import registry as data_registry  # module attribute: a test replaces dataset_info
from benchmark.data.partition import PartitionData, load_partition_for, make_partition
from benchmark.data.registry import load_dataset
from benchmark.data.subsets import parse_subset, stratified_indices
from benchmark.devices import pick_device
from benchmark.errors import ConfigError
from benchmark.features.cache import FeatureCache, FeatureSet
from benchmark.features.extract import extract_features
from benchmark.features.pointer import load_features, load_train_test, partition_data_of, pointer_dict
from benchmark.features.preprocess import get_preprocess
from benchmark.fs_errors import check_output_file
from benchmark.io import atomic_write_json
from benchmark.kv import parse_kv  # noqa: F401  (re-exported: pipeline.parse_kv)
from benchmark.models.backbones import backbone_spec
from benchmark.provenance import git_commit, machine, package_versions, peak_rss_mb
from benchmark.tidy import concat_tidy, make_row, write_tidy


def extract_step(
    *,
    dataset: str,
    split: str,
    backbone: str,
    weights: str,
    preprocess: str,
    out: str | Path,
    precision: str = "fp32",
    subset: str = "all",
    subset_seed: int = 0,
    flip_seed: int = 0,
    batch_size: int | str = "auto",
    device: str | None = None,
    data_root: str | None = None,
    weights_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Extract (or find in the cache) the features of one split and write a pointer JSON to ``out``.

    Everything that can be checked without the data is checked before any is read: the names, the device
    (:func:`~benchmark.devices.pick_device`), ``out`` (not a folder) and the cache folder (not a file).
    """
    data_registry.dataset_info(dataset), backbone_spec(backbone)  # unknown names fail before any data is read
    pick_device(device)
    check_output_file(out, "--out")
    cache = FeatureCache(cache_dir)
    pre = get_preprocess(preprocess, flip_seed)
    data = load_dataset(dataset, split, data_root)
    kind, per_class = parse_subset(subset)
    if kind == "stratified":
        data = data.subset(
            stratified_indices(data.labels, per_class, subset_seed), f"{subset}/seed{subset_seed}"
        )
    fs = extract_features(
        data,
        backbone,
        weights,
        pre,
        precision=precision,  # type: ignore[arg-type]
        batch_size=batch_size,
        device=device,
        cache=cache,
        weights_dir=weights_dir,
    )
    pointer = pointer_dict(
        fs,
        cache,
        {
            "dataset": dataset,
            "split": split,
            "subset": subset,
            "backbone": backbone,
            "num_classes": data.num_classes,
            "data_checksum": data.checksum,
            "precision": precision,
            "cache_hit": fs.cache_hit,
            "extract_wall_s": fs.meta.get("wall_s"),
            "images_per_s": fs.meta.get("images_per_s"),
        },
    )
    atomic_write_json(out, pointer)  # no sidecar: read_pointer cross-checks it (fields, the entry's sha256)
    return pointer


def load_pointer(path: str | Path, split: str | None = None) -> tuple[dict[str, Any], FeatureSet]:
    """Read a pointer JSON and the features it names (:func:`benchmark.features.pointer.load_features`)."""
    return load_features(path, split)


def split_labels(
    dataset: str, split: str, subset: str = "all", subset_seed: int = 0, data_root: str | None = None
):
    """The split (after the subset) whose labels and user ids the partition is drawn from."""
    data = load_dataset(dataset, split, data_root)
    kind, per_class = parse_subset(subset)
    if kind == "stratified":
        data = data.subset(
            stratified_indices(data.labels, per_class, subset_seed), f"{subset}/seed{subset_seed}"
        )
    return data


def partition_step(
    *,
    dataset: str,
    subset: str,
    scheme: str,
    seed: int,
    out: str | Path,
    params: Mapping[str, Any],
    subset_seed: int = 0,
    data_root: str | None = None,
) -> dict[str, Any]:
    """Partition the train split of ``dataset`` over clients and write the partition JSON."""
    data = split_labels(dataset, "train", subset, subset_seed, data_root)
    kwargs = dict(params)
    if scheme == "natural":
        if data.groups is None:
            raise ConfigError(f"dataset {dataset!r} has no natural users", "use another partition scheme")
        kwargs["user_ids"] = data.groups
    part = make_partition(scheme, data.labels, seed, **kwargs)
    record = PartitionData(dataset, subset, "train", len(data.labels), data.checksum)
    part = part.with_data(record)
    part.to_json(out)
    return {"sha256": part.sha256, "clients": part.num_clients}


#: Every closed-form method of the suite (the ``suite`` protocol computes them all).
CLOSED_FORM_METHODS = ALL_METHODS


def closed_form_step(
    *,
    train: str | Path,
    test: str | Path,
    partition: str | Path,
    out: str | Path,
    protocol: str = "suite",
    methods: Sequence[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> int:
    """Run closed-form methods on cached features for one partition; write tidy rows (accuracy).

    ``protocol`` (:mod:`benchmark.closed_form.protocols`) gives the methods and their options, e.g. the
    fedcof code's float32 ``pinv`` servers and per-backbone gamma, or legate2023's bias-0 FedNCM; ``methods``
    restricts them and ``options`` overrides per method. The protocol and each method's options are written
    in the rows (``protocol``, ``note``). One-shot methods run in one pass over the clients
    (:func:`~benchmark.closed_form.run_methods`); ``wall_s`` is each method's own time plus the shared
    client moments it used.
    """
    ptr_tr, tr, _, te = load_train_test(train, test)
    part = load_partition_for(partition, partition_data_of(ptr_tr), train)
    plan = merge_options(protocol_options(protocol, ptr_tr["backbone"], seed=part.seed), options)
    chosen = list(methods) if methods else list(protocol_methods(protocol))
    unknown = [m for m in chosen if m not in plan]
    if unknown:
        raise ConfigError(
            f"method(s) {', '.join(unknown)} not in closed-form protocol {protocol!r}",
            f"use the protocol's methods ({', '.join(protocol_methods(protocol))}) or protocol 'suite'",
        )
    results = run_methods(
        {method: dict(plan[method]) for method in chosen},
        tr.features,
        tr.labels,
        te.features,
        te.labels,
        list(part.clients),
        ptr_tr["num_classes"],
    )
    rows = []
    for method, res in results.items():
        opts = dict(plan[method])
        wall = float(res.extra["wall_s"])
        rows.append(
            make_row(
                dataset=ptr_tr["dataset"],
                model=ptr_tr["backbone"],
                weights=ptr_tr["weights"]["source"],
                weights_sha256=ptr_tr["weights"]["sha256"],
                method=method,
                fl_algorithm="one-shot" if get_method_federated(method) else "centralised",
                partition=part.scheme,
                alpha=part.params.get("alpha"),
                clients=part.num_clients,
                participation=1.0,
                seed=part.seed,
                metric="accuracy",
                value=round(float(res.accuracy), 4),
                unit="percent",
                protocol=protocol,
                note=json.dumps(opts, sort_keys=True),
                data_checksum=ptr_tr["data_checksum"],
                partition_hash=part.sha256,
                features_key=ptr_tr["key_digest"],
                git_commit=git_commit(),
                versions=package_versions(),
                machine=machine(),
                wall_s=round(wall, 4),
                peak_rss_mb=round(peak_rss_mb(), 1),
            )
        )
    write_tidy(rows, out)
    return len(rows)


def get_method_federated(name: str) -> bool:
    return bool(get_method(name).federated)


def collect_step(
    inputs: Sequence[str | Path],
    out: str | Path,
    *,
    methods: Sequence[str] = (),
    labels: Mapping[str, Any] | None = None,
) -> int:
    """Concatenate tidy CSVs, optionally keeping only ``methods`` and setting ``labels`` columns."""
    df = concat_tidy(inputs)
    if methods:
        df = df[df["method"].isin(list(methods))]
    for key, value in (labels or {}).items():
        df[key] = value
    write_tidy(df, out)
    return len(df)
