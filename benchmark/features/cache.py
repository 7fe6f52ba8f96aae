"""Content-addressed feature cache: one safetensors file plus a JSON metadata file per key.

The key is the sha256 of a canonical JSON of everything that determines the features: dataset, split,
data checksum (and subset), backbone, weights identity (source, name, sha256), preprocessing (every field,
including the frozen-flip seed) and precision. Entries are written atomically: the tensor file first,
then the metadata (which records the tensor file's sha256, and has a checksum sidecar of its own); an entry
without metadata does not exist, and one whose tensor file does not match its metadata (or whose metadata does
not match its sidecar) is reported as corrupt, naming the files to delete. The tensor file is hashed once when
it is written and once each time it is read, before it is parsed. A write that fails (a full disk: one
:class:`~benchmark.errors.DiskFullError`) leaves no part of the entry behind.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmark.errors import CacheCorruptError, CorruptFileError
from benchmark.fs_errors import check_folder
from benchmark.io import (
    atomic_path,
    atomic_write_json,
    read_verified_json,
    sha256_bytes,
    sha256_file,
    sidecar_path,
)
from benchmark.models.weights import WeightsIdentity
from benchmark.paths import cache_dir


@dataclass(frozen=True)
class FeatureKey:
    """Everything that determines a feature matrix."""

    dataset: str
    split: str
    data_checksum: str
    backbone: str
    weights: WeightsIdentity
    preprocess: str  # Preprocess.key()
    precision: str

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["preprocess"] = json.loads(self.preprocess)
        return d

    def digest(self) -> str:
        return sha256_bytes(json.dumps(self.as_dict(), sort_keys=True).encode())


@dataclass
class FeatureSet:
    """Features ``(N, d)`` float32, labels ``(N,)`` int64 and the metadata they were cached with."""

    features: np.ndarray
    labels: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)
    cache_hit: bool = False

    @property
    def key_digest(self) -> str:
        return str(self.meta.get("key_digest", ""))


def read_verified_entry(
    tensors: Path, want_sha256: str, want_shape: tuple[int, ...], recorder: str, fix: str
) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of the cache file ``tensors``, after checking its sha256 and shape against what
    ``recorder`` (its metadata, or a pointer) records; any failure is a :class:`CacheCorruptError` with ``fix``."""
    from safetensors.numpy import load_file  # local: heavy import (safetensors)

    if sha256_file(tensors) != want_sha256:
        raise CacheCorruptError(f"cache file {tensors} does not match the sha256 {recorder} records", fix)
    try:
        arrays = load_file(str(tensors))
        feats, labels = arrays["features"], arrays["labels"]
    except Exception as exc:
        raise CacheCorruptError(f"cache file {tensors} cannot be read ({exc})", fix) from exc
    if feats.ndim != 2 or tuple(feats.shape) != tuple(want_shape) or labels.shape != (want_shape[0],):
        raise CacheCorruptError(
            f"cache file {tensors} has features {feats.shape} and labels {labels.shape}, but {recorder} "
            f"records {tuple(want_shape)}",
            fix,
        )
    return feats, labels


class FeatureCache:
    """A folder of ``<digest>.safetensors`` + ``<digest>.json`` entries."""

    def __init__(self, root: str | Path | None = None) -> None:
        """The cache under ``root`` (else ``$FLB_CACHE_DIR``, else ``results/cache``). A cache folder that is
        a file, or lies under one, is one :class:`~benchmark.errors.ConfigError` naming it and the setting it
        came from; nothing is created here."""
        base = cache_dir(root)
        if root not in (None, ""):
            setting, point = "set by --cache-dir", "pass a folder to --cache-dir"
        elif os.environ.get("FLB_CACHE_DIR"):
            setting, point = "set by FLB_CACHE_DIR", "point FLB_CACHE_DIR at a folder"
        else:
            setting, point = "the default", "set FLB_CACHE_DIR (or --cache-dir) to a folder"
        what, fix = f"the feature cache folder ({setting})", f"move or delete that file, or {point}"
        check_folder(base, what, fix)
        self.root = check_folder(base / "features", what, fix)

    def paths(self, key: FeatureKey) -> tuple[Path, Path]:
        return self.paths_from_digest(key.digest())

    def paths_from_digest(self, digest: str) -> tuple[Path, Path]:
        return self.root / f"{digest}.safetensors", self.root / f"{digest}.json"

    def get(self, key: FeatureKey) -> FeatureSet | None:
        """The cached entry for ``key``, or None; raises :class:`CacheCorruptError` on a damaged entry."""
        tensors, meta_path = self.paths(key)
        if not meta_path.exists():
            return None
        fix = f"delete {tensors.name} and {meta_path.name} from {self.root} and run again"
        try:
            meta = read_verified_json(meta_path, fix=fix)
            want_sha, want_shape = meta["file_sha256"], tuple(meta["shape"])
        except CorruptFileError as exc:
            raise CacheCorruptError(f"feature cache metadata is unreadable: {exc.what}", fix) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CacheCorruptError(f"feature cache metadata {meta_path} is unreadable ({exc})", fix) from exc
        if not tensors.exists():
            raise CacheCorruptError(f"feature cache file {tensors} is missing (its metadata exists)", fix)
        feats, labels = read_verified_entry(tensors, want_sha, want_shape, f"its metadata {meta_path.name}", fix)
        return FeatureSet(feats, labels, meta, cache_hit=True)

    def put(
        self, key: FeatureKey, features: np.ndarray, labels: np.ndarray, extra: dict[str, Any]
    ) -> FeatureSet:
        """Store an entry atomically and return it; a failed write leaves neither of its files."""
        from safetensors.numpy import save_file  # local: heavy import (safetensors)

        tensors, meta_path = self.paths(key)
        feats = np.ascontiguousarray(features, dtype=np.float32)
        labs = np.ascontiguousarray(labels, dtype=np.int64)
        with atomic_path(tensors, isolate=True) as tmp:  # safetensors writes a temporary file of its own
            save_file({"features": feats, "labels": labs}, str(tmp))
            file_sha = sha256_file(tmp)
        meta = {
            **extra,
            "key": key.as_dict(),
            "key_digest": key.digest(),
            "shape": list(feats.shape),
            "file_sha256": file_sha,
        }
        try:
            atomic_write_json(meta_path, meta, checksum=True)
        except BaseException:  # no half entry: without metadata it would only take space, and metadata
            for path in (tensors, meta_path, sidecar_path(meta_path)):  # without its sidecar is unchecked
                path.unlink(missing_ok=True)
            raise
        return FeatureSet(feats, labs, meta, cache_hit=False)
