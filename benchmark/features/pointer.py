"""Feature pointer files (``results/features/.../<split>.json``): written by ``flb extract``, read by every
consumer (``flb closed-form``, ``flb fl-run``, the lr grid) through the one loader :func:`load_features`.

A pointer names its cache entry by a path *relative to the cache root* (``features/<digest>.safetensors``), so
a results folder copied to another machine or checkout still loads: the entry is looked up under the current
cache root (``--cache-dir`` / ``$FLB_CACHE_DIR`` / ``results/cache``), then under the root it was extracted
into (``cache_root``, recorded). Pointers written before held absolute paths; they load while that file
exists (or while the same entry is under the current cache root).

:func:`load_features` gives one error, naming the file and what to do, for each way a pointer can be wrong:
missing, not JSON, a field missing, the other split than the one asked for (``--train``/``--test`` swapped),
an entry that cannot be found, one that does not match the sha256 the pointer records (the fix names the
pointer *and* both files of the cache entry, so that one deletion and one re-run repair it), a shape that
disagrees with the pointer, and NaN or inf in either split (argmax of NaN is class 0: a plausible accuracy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.data.partition import PartitionData
from benchmark.errors import CacheCorruptError, ConfigError, DataMissingError
from benchmark.features.cache import FeatureCache, FeatureSet, read_verified_entry
from benchmark.paths import cache_dir as default_cache_dir

#: Fields every pointer has (``flb extract`` has always written them).
REQUIRED_FIELDS: tuple[str, ...] = (
    "dataset", "split", "subset", "backbone", "num_samples", "feature_dim", "num_classes", "key_digest",
    "tensors", "file_sha256", "data_checksum", "weights",
)  # fmt: skip

#: Fields the train and test pointers of one run must share.
PAIR_FIELDS: tuple[str, ...] = ("dataset", "subset", "backbone", "feature_dim", "num_classes")

REEXTRACT = (
    "re-run the extraction (`snakemake <target>` re-runs it once the pointer is gone, or `flb extract`)"
)


def pointer_dict(fs: FeatureSet, cache: FeatureCache, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The pointer JSON of a cache entry: ``fields`` plus the entry's identity, its paths relative to the
    cache root and the (absolute) cache root it was written into."""
    tensors, meta_path = cache.paths_from_digest(fs.key_digest)
    root = cache.root.parent
    return {
        **fields,
        "num_samples": int(fs.features.shape[0]),
        "feature_dim": int(fs.features.shape[1]),
        "key_digest": fs.key_digest,
        "tensors": tensors.relative_to(root).as_posix(),
        "metadata": meta_path.relative_to(root).as_posix(),
        "cache_root": str(root.resolve()),
        "file_sha256": fs.meta["file_sha256"],
        "weights": fs.meta["key"]["weights"],
        "preprocess": fs.meta["key"]["preprocess"],
    }


def read_pointer(path: str | Path) -> dict[str, Any]:
    """The pointer JSON at ``path``, with every required field (one clear error otherwise)."""
    path = Path(path)
    again = f"delete {path} and {REEXTRACT}"
    if not path.is_file():
        raise DataMissingError(
            f"feature pointer {path} does not exist",
            f"{REEXTRACT}, or pass the path `flb extract --out` wrote",
        )
    try:
        ptr = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CacheCorruptError(f"feature pointer {path} is not readable JSON ({exc})", again) from None
    if not isinstance(ptr, dict):
        raise CacheCorruptError(f"feature pointer {path} is not a JSON object", again)
    missing = [k for k in REQUIRED_FIELDS if k not in ptr]
    if missing:
        raise CacheCorruptError(f"feature pointer {path} lacks field(s) {', '.join(missing)}", again)
    return ptr


def _candidates(ptr: Mapping[str, Any], cache_root: str | Path | None) -> list[Path]:
    rel = Path(str(ptr["tensors"]))
    here = default_cache_dir(cache_root)
    if rel.is_absolute():  # a pointer written before paths were relative to the cache root
        return [rel, here / "features" / rel.name]
    out = [here / rel]
    if ptr.get("cache_root"):
        out.append(Path(str(ptr["cache_root"])) / rel)
    return out


def cache_entry_files(tensors: Path) -> tuple[Path, Path]:
    """The two files of a cache entry: ``<digest>.safetensors`` and ``<digest>.json``."""
    return tensors, tensors.with_suffix(".json")


def load_features(
    path: str | Path, split: str | None = None, *, cache_root: str | Path | None = None
) -> tuple[dict[str, Any], FeatureSet]:
    """Read the pointer at ``path`` and the features it names; ``split`` (``train``/``test``) is checked.

    Verifies the tensor file's sha256 before reading it, its shape against the pointer, and that every
    feature is finite. Every failure is one :class:`~benchmark.errors.BenchmarkError` naming ``path``.
    """
    path = Path(path)
    ptr = read_pointer(path)
    if split is not None and ptr["split"] != split:
        raise ConfigError(
            f"feature pointer {path}: field 'split' is {ptr['split']!r}, but it was passed as the {split} "
            f"features (--{split})",
            f"pass the {split} pointer (results/features/.../{split}.json); were --train and --test swapped?",
        )
    tried = _candidates(ptr, cache_root)
    found = next((p for p in tried if p.is_file()), None)
    if found is None:
        raise DataMissingError(
            f"features named by {path} are not in the cache (looked for {', '.join(map(str, tried))})",
            "point FLB_CACHE_DIR (or --cache-dir) at the cache folder the features were extracted into "
            f"(copy it with the results folder), or delete {path} and {REEXTRACT}",
        )
    entry = cache_entry_files(found)
    fix = f"delete {path}, {entry[0]} and {entry[1]}, then {REEXTRACT}"
    want = (int(ptr["num_samples"]), int(ptr["feature_dim"]))
    feats, labels = read_verified_entry(found, ptr["file_sha256"], want, f"the pointer {path}", fix)
    check_finite(feats, f"{ptr['split']} features of {path} ({found})", fix)
    return ptr, FeatureSet(feats, labels, {"key_digest": ptr["key_digest"]}, True)


def check_finite(features: np.ndarray, what: str, fix: str) -> None:
    """Raise :class:`CacheCorruptError` when ``features`` hold NaN or inf (never score them)."""
    bad = ~np.isfinite(features)
    if bad.any():
        rows = int(bad.any(axis=1).sum()) if features.ndim == 2 else int(bad.sum())
        raise CacheCorruptError(
            f"{what} hold {int(bad.sum())} NaN/inf value(s) in {rows} row(s); they would be scored as class 0",
            fix,
        )


def check_pair(
    ptr_tr: Mapping[str, Any], ptr_te: Mapping[str, Any], train: str | Path, test: str | Path
) -> None:
    """The train and test pointers of one run come from one extraction (dataset, subset, backbone, weights)."""
    for key in PAIR_FIELDS:
        if ptr_tr[key] != ptr_te[key]:
            raise ConfigError(
                f"train pointer {train} and test pointer {test} differ in field {key!r}: "
                f"{ptr_tr[key]!r} vs {ptr_te[key]!r}",
                "pass the two splits of one extraction",
            )
    w_tr, w_te = (p.get("weights") or {} for p in (ptr_tr, ptr_te))
    if w_tr.get("sha256") != w_te.get("sha256"):
        raise ConfigError(
            f"train pointer {train} and test pointer {test} come from different weights (field 'weights')",
            "pass the two splits of one extraction",
        )


def load_train_test(
    train: str | Path, test: str | Path, *, cache_root: str | Path | None = None
) -> tuple[dict[str, Any], FeatureSet, dict[str, Any], FeatureSet]:
    """Both splits of one run, each checked by :func:`load_features`, and checked against each other."""
    ptr_tr, tr = load_features(train, "train", cache_root=cache_root)
    ptr_te, te = load_features(test, "test", cache_root=cache_root)
    check_pair(ptr_tr, ptr_te, train, test)
    return ptr_tr, tr, ptr_te, te


def partition_data_of(ptr: Mapping[str, Any]):
    """The :class:`~benchmark.data.partition.PartitionData` a partition of these (train) features records."""
    return PartitionData(
        dataset=str(ptr["dataset"]),
        subset=str(ptr["subset"]),
        split=str(ptr["split"]),
        num_samples=int(ptr["num_samples"]),
        data_checksum=str(ptr["data_checksum"]),
    )
