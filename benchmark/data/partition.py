"""Client partitions: which dataset indices each federated client holds.

Every partitioner is a pure function of ``(labels, seed, parameters)`` and returns a :class:`Partition`,
an immutable list of per-client int64 index arrays pinned by the sha256 of those indices. Randomness
comes only from ``benchmark.seeding.numpy_rng(seed, "partition")``: the same seed always gives the same
partition (same hash) on the same numpy major version, and the partition stream is independent of the
client-sampling, model-init and data-order streams.

Schemes (registered by name, see :func:`get_partitioner`):

``dirichlet``
    Per-client label proportions with balanced client sizes: the algorithm of the legate2023 / FLSim
    ``DirichletSharder`` and of FedCOF's ``partition_dataset_by_dirichlet`` (reference audit,
    papers-code.md §1.2, §2.2), following Hsu et al. 2019 ("Measuring the effects of non-identical data
    distribution", arXiv:1909.06335), which both papers cite for their split.
``dirichlet_fedcof``
    The fedcof code's sharder replayed exactly on numpy's legacy stream (``np.random.seed(seed)``), so the
    partitions are the ones the fedcof tables were computed on.
``dirichlet_per_class``
    Per-class proportions over clients (Yurochkin et al. 2019, Wang et al. 2020 "FedMA", and
    NIID-Bench, Li et al. 2022): unbalanced client sizes.
``iid``
    A shuffled, near-equal split.
``natural``
    Natural users from a per-sample user id (iNaturalist-User-120k, Hsu et al. 2020).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmark.errors import (
    CacheCorruptError,
    ChecksumError,
    ConfigError,
    DataMissingError,
    UnknownNameError,
)
from benchmark.io import atomic_write_text
from benchmark.seeding import check_seed, numpy_rng

FORMAT = "fl-pretrain-bench/partition"
FORMAT_VERSION = 1
_HASH_HEADER = b"fl-pretrain-bench partition v1\n"


# --------------------------------------------------------------------------------------------------
# The Partition record
# --------------------------------------------------------------------------------------------------


def partition_sha256(clients: Sequence[npt.ArrayLike]) -> str:
    """sha256 of a list of client index arrays; client order, index order and client sizes all count.

    Hashed bytes: a fixed header, the number of clients and every client size (little-endian int64),
    then all indices concatenated in client order (little-endian int64). Two partitions have the same
    hash exactly when they hold the same indices in the same order with the same client boundaries.
    """
    arrays = [np.asarray(c, dtype="<i8").ravel() for c in clients]
    h = hashlib.sha256(_HASH_HEADER)
    h.update(np.asarray([len(arrays)], dtype="<i8").tobytes())
    h.update(np.asarray([a.size for a in arrays], dtype="<i8").tobytes())
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _canonical_json(value: Any, what: str) -> Any:
    """Round-trip through JSON so in-memory and reloaded partitions compare equal."""
    try:
        return json.loads(json.dumps(value, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"Partition.{what} must be JSON-serialisable: {err}", "use plain numbers, lists, str"
        ) from None


def _as_index_array(client: object, k: int) -> np.ndarray:
    arr = np.asarray(client)
    if arr.ndim != 1:
        raise ConfigError(f"Partition.clients[{k}] must be a 1-D index array, got shape {arr.shape}")
    if arr.size == 0:
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise ConfigError(f"Partition.clients[{k}] must hold integers, got dtype {arr.dtype}")
    out = np.array(arr, dtype=np.int64, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class PartitionData:
    """Which rows a partition indexes: the split it was drawn on, as ``flb partition`` records it.

    ``data_checksum`` is the split's checksum (after the subset), the one the feature pointer of that split
    records, so :func:`load_partition_for` can tell a partition of another dataset, subset or data root from
    the right one (a ``stratified10`` partition on ``stratified100`` features would train on 100 of 1,000 rows).
    """

    dataset: str
    subset: str
    split: str
    num_samples: int
    data_checksum: str

    def describe(self) -> str:
        return (
            f"{self.dataset} {self.split} split, subset {self.subset}, {self.num_samples} samples, "
            f"data checksum {self.data_checksum[:12]}"
        )

    @classmethod
    def from_dict(cls, obj: object, source: str) -> PartitionData:
        fields = {"dataset": str, "subset": str, "split": str, "num_samples": int, "data_checksum": str}
        if not isinstance(obj, Mapping) or any(not isinstance(obj.get(k), t) for k, t in fields.items()):
            raise CacheCorruptError(
                f"{source}: field 'data' must hold {', '.join(fields)}", f"delete {source} and rebuild it"
            )
        return cls(**{k: obj[k] for k in fields})


@dataclass(frozen=True, eq=False)
class Partition:
    """Per-client sample indices, the scheme and parameters that made them, and their sha256.

    ``clients[k]`` is client k's int64 index array (read-only), in the order the scheme produced it (for
    ``dirichlet`` that is the draw order, which FLSim keeps as the batch order). No index appears twice.
    ``sha256`` is :func:`partition_sha256` of ``clients``; leave it empty to have it computed, or pass a
    stored value to have it checked. ``params`` are the scheme's parameters, ``extras`` any outputs
    besides the indices (e.g. the natural users' ids); both are JSON-normalised. ``seed`` is the
    partition seed (``None`` for schemes that use no randomness). ``data`` records the split the indices
    refer to (:class:`PartitionData`; ``flb partition`` always sets it, consumers check it with
    :func:`load_partition_for`); it is not part of ``sha256``.
    """

    clients: tuple[np.ndarray, ...]
    scheme: str
    params: Mapping[str, Any]
    seed: int | None
    sha256: str = ""
    extras: Mapping[str, Any] = field(default_factory=dict)
    data: PartitionData | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, str) or not self.scheme:
            raise ConfigError(f"Partition.scheme must be a non-empty string, got {self.scheme!r}")
        if isinstance(self.clients, np.ndarray) or not isinstance(self.clients, Sequence):
            raise ConfigError("Partition.clients must be a sequence of 1-D index arrays")
        clients = tuple(_as_index_array(c, k) for k, c in enumerate(self.clients))
        if not clients:
            raise ConfigError("Partition.clients is empty", "a partition needs at least one client")
        flat = np.concatenate(clients)
        if flat.size and flat.min() < 0:
            raise ConfigError("Partition.clients holds a negative index", "indices must be >= 0")
        if np.unique(flat).size != flat.size:
            raise ConfigError(
                "Partition.clients assigns some index more than once", "each sample has one client"
            )
        seed = None if self.seed is None else check_seed(self.seed, "Partition.seed")
        digest = partition_sha256(clients)
        if self.sha256 and self.sha256 != digest:
            raise ConfigError(
                f"Partition.sha256 {self.sha256} does not match its indices ({digest})",
                "the indices were altered; rebuild the partition",
            )
        object.__setattr__(self, "clients", clients)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "sha256", digest)
        object.__setattr__(self, "params", _canonical_json(dict(self.params), "params"))
        object.__setattr__(self, "extras", _canonical_json(dict(self.extras), "extras"))

    # -- identity ----------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Partition):
            return NotImplemented
        return (self.sha256, self.scheme, self.params, self.seed, self.extras, self.data) == (
            other.sha256,
            other.scheme,
            other.params,
            other.seed,
            other.extras,
            other.data,
        )

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __repr__(self) -> str:
        return (
            f"Partition(scheme={self.scheme!r}, num_clients={self.num_clients}, "
            f"num_assigned={self.num_assigned}, seed={self.seed}, params={self.params}, "
            f"sha256={self.sha256[:12]}...)"
        )

    # -- summaries ---------------------------------------------------------------------------------
    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return len(self.clients)

    @property
    def sizes(self) -> np.ndarray:
        """Per-client sample counts, shape (K,)."""
        return np.array([c.size for c in self.clients], dtype=np.int64)

    @property
    def num_assigned(self) -> int:
        """Number of samples assigned to some client."""
        return int(self.sizes.sum())

    def client_of(self, num_samples: int) -> np.ndarray:
        """Client id of every sample, shape (num_samples,); -1 for samples no client holds."""
        flat = np.concatenate(self.clients)
        if flat.size and flat.max() >= num_samples:
            raise ConfigError(
                f"num_samples={num_samples} but the partition holds index {int(flat.max())}",
                "pass the size of the split this partition was made for",
            )
        out = np.full(num_samples, -1, dtype=np.int64)
        out[flat] = np.repeat(np.arange(self.num_clients, dtype=np.int64), self.sizes)
        return out

    def client_class_counts(self, labels: npt.ArrayLike, num_classes: int | None = None) -> np.ndarray:
        """(K, C) int64 array: ``[k, c]`` = number of samples of class c held by client k."""
        y = _as_labels(labels)
        c_total = _num_classes(y, num_classes)
        flat = np.concatenate(self.clients)
        if flat.size and flat.max() >= y.size:
            raise ConfigError(
                f"labels has {y.size} entries but the partition holds index {int(flat.max())}",
                "pass the labels of the split this partition was made for",
            )
        owner = np.repeat(np.arange(self.num_clients, dtype=np.int64), self.sizes)
        counts = np.bincount(owner * c_total + y[flat], minlength=self.num_clients * c_total)
        return counts.reshape(self.num_clients, c_total).astype(np.int64)

    def with_data(self, data: PartitionData) -> Partition:
        """The same partition recording the split it was drawn on (what ``flb partition`` writes)."""
        return replace(self, data=data)

    # -- caching -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (format tag, version, metadata, sha256 and the index lists)."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "scheme": self.scheme,
            "params": dict(self.params),
            "seed": self.seed,
            "sha256": self.sha256,
            "extras": dict(self.extras),
            "num_clients": self.num_clients,
            "clients": [c.tolist() for c in self.clients],
            "data": None if self.data is None else asdict(self.data),
        }

    def to_json(self, path: str | Path) -> None:
        """Write the partition to ``path`` atomically (compact JSON; nothing half-written is left)."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), allow_nan=False)
        atomic_write_text(path, text + "\n")

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], source: str = "partition") -> Partition:
        """Rebuild and validate a partition from :meth:`to_dict` output; :class:`CacheCorruptError` if bad."""
        fix = f"delete {source} and rebuild the partition"
        if not isinstance(obj, Mapping):
            raise CacheCorruptError(f"{source}: top level is not a JSON object", fix)
        if obj.get("format") != FORMAT or obj.get("version") != FORMAT_VERSION:
            raise CacheCorruptError(
                f"{source}: format {obj.get('format')!r} version {obj.get('version')!r} is not "
                f"{FORMAT!r} version {FORMAT_VERSION}",
                fix,
            )
        required = ("scheme", "params", "seed", "sha256", "extras", "num_clients", "clients")
        missing = [k for k in required if k not in obj]
        if missing:
            raise CacheCorruptError(f"{source}: missing field(s) {', '.join(missing)}", fix)
        clients = obj["clients"]
        if not isinstance(clients, list) or len(clients) != obj["num_clients"]:
            raise CacheCorruptError(f"{source}: 'clients' is not a list of num_clients index lists", fix)
        arrays = []
        for k, c in enumerate(clients):
            if not isinstance(c, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in c):
                raise CacheCorruptError(f"{source}: clients[{k}] is not a list of integers", fix)
            arrays.append(np.asarray(c, dtype=np.int64))
        if not isinstance(obj["params"], Mapping) or not isinstance(obj["extras"], Mapping):
            raise CacheCorruptError(f"{source}: 'params' and 'extras' must be JSON objects", fix)
        data = None if obj.get("data") is None else PartitionData.from_dict(obj["data"], source)
        try:
            return cls(
                clients=tuple(arrays),
                scheme=obj["scheme"],
                params=obj["params"],
                seed=obj["seed"],
                sha256=str(obj["sha256"]),
                extras=obj["extras"],
                data=data,
            )
        except ConfigError as err:
            raise CacheCorruptError(f"{source}: {err.what}", fix) from None

    @classmethod
    def from_json(
        cls,
        path: str | Path,
        *,
        expected_sha256: str | None = None,
        num_samples: int | None = None,
    ) -> Partition:
        """Load a partition written by :meth:`to_json`, validating format, indices and hash.

        Raises :class:`DataMissingError` if the file is absent, :class:`CacheCorruptError` if it cannot be
        parsed, its indices do not match its stored sha256, or (with ``num_samples``) an index is out of
        range, and :class:`ChecksumError` if ``expected_sha256`` is given and differs.
        """
        path = Path(path)
        if not path.is_file():
            raise DataMissingError(f"partition file {path} is missing", "build the partition first")
        try:
            obj = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CacheCorruptError(
                f"{path}: not readable JSON ({err})", f"delete {path} and rebuild it"
            ) from None
        part = cls.from_dict(obj, source=str(path))
        if num_samples is not None:
            flat = np.concatenate(part.clients)
            if flat.size and int(flat.max()) >= num_samples:
                raise CacheCorruptError(
                    f"{path}: index {int(flat.max())} out of range for a split of {num_samples} samples",
                    f"the cache belongs to another dataset split; delete {path} and rebuild it",
                )
        if expected_sha256 is not None and part.sha256 != expected_sha256.lower():
            raise ChecksumError(
                f"{path}: partition sha256 {part.sha256} differs from the expected {expected_sha256}",
                "the cached partition is not the pinned one; delete it and rebuild with the pinned seed",
            )
        return part


def rebuild_command(part: Partition | None, data: PartitionData, path: str | Path) -> str:
    """The ``flb partition`` command that rebuilds ``path`` for ``data`` (scheme and seed of ``part``)."""
    scheme = "<scheme>" if part is None else part.scheme
    seed = "<seed>" if part is None or part.seed is None else part.seed
    params = "" if part is None else "".join(f" --param {k}={v}" for k, v in sorted(part.params.items()))
    return (
        f"flb partition --dataset {data.dataset} --subset {data.subset} --scheme {scheme}{params} "
        f"--seed {seed} --out {path}"
    )


def load_partition_for(path: str | Path, expected: PartitionData, features: str | Path) -> Partition:
    """Load the partition at ``path`` and check it was drawn on the rows of ``features`` (the train pointer).

    The one check every consumer of a partition file calls (``flb closed-form``, ``flb fl-run``): the
    partition's :class:`PartitionData` must equal ``expected`` (dataset, subset, split, sample count and
    data checksum). A partition without the record (written before it existed), or of other data, is one
    :class:`CacheCorruptError` naming both files and the command that rebuilds the partition.
    """
    part = Partition.from_json(path)
    again = (
        f"delete {path} and rebuild it for these features (snakemake rebuilds it, or "
        f"`{rebuild_command(part, expected, path)}`)"
    )
    if part.data is None:
        raise CacheCorruptError(
            f"partition {path} does not record which data it was drawn on (written by an older version), so "
            f"it cannot be checked against features {features}",
            again,
        )
    if part.data != expected:
        got, want = asdict(part.data), asdict(expected)
        diff = ", ".join(
            f"{k} {str(got[k])[:16]!r} vs {str(want[k])[:16]!r}" for k in want if got[k] != want[k]
        )
        raise CacheCorruptError(
            f"partition {path} was drawn on {part.data.describe()}, but features {features} are "
            f"{expected.describe()} ({diff})",
            again,
        )
    flat = np.concatenate(part.clients)
    if flat.size and int(flat.max()) >= expected.num_samples:
        raise CacheCorruptError(
            f"partition {path}: index {int(flat.max())} out of range for the {expected.num_samples} rows it "
            "records",
            again,
        )
    return part


# --------------------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------------------


def _as_labels(labels: npt.ArrayLike, name: str = "labels") -> np.ndarray:
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be a 1-D array of class ids, got shape {arr.shape}")
    if arr.size == 0:
        raise ConfigError(f"{name} is empty", "pass the class id of every sample of the split")
    if arr.dtype.kind not in "iu":
        raise ConfigError(
            f"{name} must hold integer class ids, got dtype {arr.dtype}", "convert with labels.astype(int)"
        )
    if arr.min() < 0:
        raise ConfigError(f"{name} holds a negative class id ({int(arr.min())})", "class ids are 0..C-1")
    return arr.astype(np.int64, copy=False)


def _num_classes(y: np.ndarray, num_classes: int | None) -> int:
    needed = int(y.max()) + 1
    if num_classes is None:
        return needed
    c = _positive_int(num_classes, "num_classes")
    if c < needed:
        raise ConfigError(
            f"num_classes={c} but labels holds class id {needed - 1}", f"set num_classes >= {needed}"
        )
    return c


def _positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _num_clients(value: object, n: int) -> int:
    k = _positive_int(value, "num_clients")
    if k > n:
        raise ConfigError(f"num_clients={k} exceeds the number of samples ({n})", f"use num_clients <= {n}")
    return k


def _alpha(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"alpha must be a positive number, got {value!r}")
    a = float(value)
    if not math.isfinite(a) or a <= 0.0:
        raise ConfigError(f"alpha must be a positive finite number, got {a}", "e.g. alpha=0.1")
    return a


def _class_pools(y: np.ndarray, c_total: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indices grouped by class in dataset order, per-class counts, per-class offsets)."""
    order = np.argsort(y, kind="stable").astype(np.int64)
    counts = np.bincount(y, minlength=c_total).astype(np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return order, counts, offsets


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

Partitioner = Callable[..., Partition]
_REGISTRY: dict[str, Partitioner] = {}


def register_partitioner(name: str) -> Callable[[Partitioner], Partitioner]:
    """Decorator registering a partitioner ``fn(labels, seed, **params) -> Partition`` under ``name``."""

    def deco(fn: Partitioner) -> Partitioner:
        if name in _REGISTRY:
            raise ConfigError(f"partition scheme {name!r} is registered twice")
        _REGISTRY[name] = fn
        return fn

    return deco


def available_partitioners() -> tuple[str, ...]:
    """Names of the registered partition schemes, sorted."""
    return tuple(sorted(_REGISTRY))


def get_partitioner(name: str) -> Partitioner:
    """The partitioner registered as ``name``; :class:`UnknownNameError` listing the names otherwise."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown partition scheme {name!r}", f"use one of: {', '.join(available_partitioners())}"
        ) from None


def make_partition(scheme: str, labels: npt.ArrayLike, seed: int | None, **params: Any) -> Partition:
    """Build a partition by scheme name, checking ``params`` against the scheme's signature.

    An unexpected or missing parameter raises :class:`ConfigError` naming it (rather than a TypeError).
    """
    fn = get_partitioner(scheme)
    sig = inspect.signature(fn)
    allowed = list(sig.parameters)[2:]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ConfigError(
            f"partition scheme {scheme!r} has no parameter(s) {', '.join(unknown)}",
            f"its parameters are: {', '.join(allowed)}",
        )
    missing = [
        p.name
        for p in list(sig.parameters.values())[2:]
        if p.default is inspect.Parameter.empty and p.name not in params
    ]
    if missing:
        raise ConfigError(f"partition scheme {scheme!r} needs parameter(s) {', '.join(missing)}")
    return fn(labels, seed, **params)


# --------------------------------------------------------------------------------------------------
# dirichlet: per-client proportions, balanced sizes (legate2023 / FLSim / FedCOF)
# --------------------------------------------------------------------------------------------------


def _dirichlet_inputs(
    rng: np.random.Generator, y: np.ndarray, c_total: int, num_clients: int, alpha: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """All random draws of :func:`dirichlet`, in order: q (K, C), shuffled class pools, uniforms (K, n)."""
    q = rng.dirichlet(np.full(c_total, alpha), size=num_clients)
    pool, counts, offsets = _class_pools(y, c_total)
    for c in range(c_total):
        if counts[c] > 1:
            seg = pool[offsets[c] : offsets[c] + counts[c]]
            seg[:] = rng.permutation(seg)
    u = rng.random((num_clients, y.size // num_clients))
    return q, pool, counts, offsets, u


def _class_cdf(q_row: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray, float, int, bool]:
    """CDF of client proportions restricted to available classes (uniform over them on a 0/0 row)."""
    p = np.where(avail, q_row, 0.0)
    cdf = np.cumsum(p)
    fallback = not cdf[-1] > 0.0
    if fallback:
        p = avail.astype(np.float64)
        cdf = np.cumsum(p)
    last = int(np.flatnonzero(p)[-1])
    return cdf, float(cdf[-1]), last, fallback


def _dirichlet_assign(
    q: np.ndarray, pool: np.ndarray, counts: np.ndarray, offsets: np.ndarray, u: np.ndarray
) -> tuple[list[np.ndarray], int]:
    """Deterministic core of :func:`dirichlet`: map the uniforms ``u`` to sample indices.

    Draw j of client k is the class ``searchsorted(cdf, u[k, j] * cdf[-1], 'right')`` under the CDF of
    ``q[k]`` restricted to the not-yet-exhausted classes, and takes that class's next unused index.
    This equals drawing one sample at a time; it is vectorised by mapping all of a client's remaining
    uniforms under the current CDF, keeping the prefix up to the first draw that exhausts a class, and
    re-mapping the rest under the new CDF (at most K + C blocks in total).
    Returns the per-client index arrays and the number of clients that hit the 0/0 fallback.
    """
    num_clients, per_client = u.shape
    c_total = counts.size
    remaining = counts.copy()
    ptr = np.zeros(c_total, dtype=np.int64)
    fallbacks = 0
    clients: list[np.ndarray] = []
    for k in range(num_clients):
        out = np.empty(per_client, dtype=np.int64)
        pos = 0
        used_fallback = False
        while pos < per_client:
            avail = remaining > 0
            cdf, total, last, fb = _class_cdf(q[k], avail)
            used_fallback |= fb
            draws = np.searchsorted(cdf, u[k, pos:] * total, side="right")
            np.minimum(draws, last, out=draws)
            hits = np.bincount(draws, minlength=c_total)
            exhausted = np.flatnonzero(avail & (hits >= remaining))
            if exhausted.size:
                stop = min(int(np.flatnonzero(draws == c)[remaining[c] - 1]) for c in exhausted)
                draws = draws[: stop + 1]
                hits = np.bincount(draws, minlength=c_total)
            m = draws.size
            order = np.argsort(draws, kind="stable")
            starts = np.cumsum(hits) - hits
            rank = np.empty(m, dtype=np.int64)
            rank[order] = np.arange(m, dtype=np.int64) - starts[draws[order]]
            out[pos : pos + m] = pool[offsets[draws] + ptr[draws] + rank]
            ptr += hits
            remaining -= hits
            pos += m
        fallbacks += int(used_fallback)
        clients.append(out)
    return clients, fallbacks


@register_partitioner("dirichlet")
def dirichlet(
    labels: npt.ArrayLike,
    seed: int,
    *,
    num_clients: int,
    alpha: float,
    num_classes: int | None = None,
) -> Partition:
    """Per-client Dirichlet label proportions with equal client sizes (legate2023 §4, fedcof §5).

    Algorithm (legate2023's FLSim ``DirichletSharder.noniid_dirichlet`` = FedCOF's
    ``partition_dataset_by_dirichlet``; papers-code.md §1.2, §2.2; the label model of Hsu et al. 2019):

    1. for each client k draw q_k ~ Dir(alpha * 1_C);
    2. shuffle each class's indices;
    3. for k = 0..K-1, give client k exactly floor(N/K) samples, one at a time: draw a class from q_k
       restricted to the classes with unused samples (renormalised), take that class's next unused index.

    Clients are filled in order, so early clients exhaust popular classes and the last clients get the
    leftovers (the reference code shows the same: papers-code.md §1.2). The ``N mod K`` samples never
    drawn stay unassigned, as in the reference. The client's indices are in draw order.

    Departures from the reference code, all deliberate:

    * seeded ``numpy.random.Generator`` from ``seeding.numpy_rng(seed, "partition")`` instead of the
      unseeded global numpy RNG (legate2023) or ``np.random.seed`` (FedCOF); partitions are therefore
      reproducible but not bit-identical to any reference run;
    * the reference zeroes an exhausted class and renormalises all rows by division; we keep q and mask
      exhausted classes, which is the same distribution (renormalisation is scale-free) up to rounding;
    * a 0/0 row (all of a client's classes with q_k > 0 are exhausted, possible when Dirichlet draws
      underflow to exact zeros at small alpha) gives NaN in the reference and crashes its multinomial
      draw; here that client draws uniformly over the remaining classes (counted in
      ``extras["zero_row_fallbacks"]``);
    * classes with no samples (``num_classes`` larger than the classes present) are excluded from the
      start. In legate2023's code a draw of such a class raises IndexError and, because ``i -= 1`` inside a
      ``for`` loop is a no-op, the client silently gets one sample fewer; we give the intended retry
      (FedCOF sidesteps it by using only the classes present). So every client gets exactly floor(N/K).

    ``num_classes`` defaults to ``max(labels) + 1``.
    """
    y = _as_labels(labels)
    seed = check_seed(seed)
    k_total = _num_clients(num_clients, y.size)
    a = _alpha(alpha)
    c_total = _num_classes(y, num_classes)
    rng = numpy_rng(seed, "partition")
    q, pool, counts, offsets, u = _dirichlet_inputs(rng, y, c_total, k_total, a)
    clients, fallbacks = _dirichlet_assign(q, pool, counts, offsets, u)
    return Partition(
        clients=tuple(clients),
        scheme="dirichlet",
        params={"num_clients": k_total, "alpha": a, "num_classes": c_total},
        seed=seed,
        extras={"zero_row_fallbacks": fallbacks, "unassigned": int(y.size - k_total * (y.size // k_total))},
    )


# --------------------------------------------------------------------------------------------------
# dirichlet_fedcof: the fedcof code's sharder, replayed draw for draw on numpy's legacy stream
# --------------------------------------------------------------------------------------------------


@register_partitioner("dirichlet_fedcof")
def dirichlet_fedcof(labels: npt.ArrayLike, seed: int, *, num_clients: int, alpha: float) -> Partition:
    """The fedcof code's Dirichlet sharder replayed exactly (papers-code.md §2.2; fedcof §5).

    The fedcof scripts call ``np.random.seed(seed)`` (seeds 0-4, alpha = 0.1, K = 100) and then run
    ``partition_dataset_by_dirichlet``, which is the algorithm of :func:`dirichlet` drawn from the global
    legacy generator. This replays it with ``numpy.random.RandomState(seed)``, the same stream, in the
    reference's order of draws:

    1. one ``dirichlet(alpha * ones(C))`` row per client, C = the classes present (``np.unique``);
    2. for each class in increasing label order, its indices in dataset order, shuffled in place;
    3. every client receives ``int(N / K)`` draws ``multinomial(1, q_k)``; a draw takes the class's next
       unused index; when a class is exhausted its column is set to 0 for every client and all rows are
       divided by their sums (rows of clients already filled may become 0/0, as in the reference).

    Assumption (stated, not checked against the reference's own output): nothing draws from the global
    numpy stream between ``np.random.seed`` and the sharder. Under it the partition equals the one the
    fedcof tables were computed on, given the same label order (torchvision's CIFAR-100 train order is the
    pickle order). Where the reference would crash (a client still to be filled whose row is 0/0) this
    raises :class:`ConfigError`. Unlike :func:`dirichlet`, the stream is not a ``seeding`` purpose stream:
    replaying the reference is the point.
    """
    y = _as_labels(labels)
    seed = check_seed(seed)
    if seed >= 2**32:  # numpy's legacy generator (the reference's np.random.seed) takes 32-bit seeds only
        raise ConfigError(f"dirichlet_fedcof replays np.random.seed(seed): seed must be < 2**32, got {seed}",
                          "use a seed in 0..4294967295 (the fedcof scripts use 0-4)")  # fmt: skip
    k_total = _num_clients(num_clients, y.size)
    a = _alpha(alpha)
    classes = np.unique(y)
    rs = np.random.RandomState(seed)
    q = np.array([rs.dirichlet(a * np.ones(classes.size)) for _ in range(k_total)])
    pools: list[np.ndarray] = []
    for c in classes:
        idx = np.flatnonzero(y == c).astype(np.int64)
        rs.shuffle(idx)
        pools.append(idx)
    sizes = np.array([p.size for p in pools], dtype=np.int64)
    used = np.zeros(classes.size, dtype=np.int64)
    per_client = int(y.size / k_total)
    skipped = 0
    clients: list[np.ndarray] = []
    with np.errstate(invalid="ignore", divide="ignore"):  # rows of filled clients may become 0/0
        for k in range(k_total):
            out: list[int] = []
            for _ in range(per_client):
                try:
                    j = int(np.argmax(rs.multinomial(1, q[k])))
                except ValueError:
                    raise ConfigError(
                        f"dirichlet_fedcof: client {k} has no class left to draw from (0/0 row); the "
                        "reference code crashes here too",
                        "use another seed or the 'dirichlet' scheme",
                    ) from None
                if used[j] >= sizes[j]:  # the reference's IndexError branch: one sample fewer
                    skipped += 1
                    continue
                out.append(int(pools[j][used[j]]))
                used[j] += 1
                if used[j] == sizes[j]:
                    q[:, j] = 0.0
                    q = q / q.sum(axis=1)[:, None]
            clients.append(np.asarray(out, dtype=np.int64))
    return Partition(
        clients=tuple(clients),
        scheme="dirichlet_fedcof",
        params={"num_clients": k_total, "alpha": a},
        seed=seed,
        extras={"skipped_draws": skipped, "unassigned": int(y.size - sum(c.size for c in clients))},
    )


# --------------------------------------------------------------------------------------------------
# dirichlet_per_class: per-class proportions over clients (Yurochkin 2019 / FedMA / NIID-Bench)
# --------------------------------------------------------------------------------------------------


@register_partitioner("dirichlet_per_class")
def dirichlet_per_class(
    labels: npt.ArrayLike,
    seed: int,
    *,
    num_clients: int,
    alpha: float,
    num_classes: int | None = None,
    min_size: int = 0,
    max_tries: int = 1000,
) -> Partition:
    """Per-class Dirichlet proportions over clients: every sample assigned, client sizes vary.

    For each class c in order: shuffle its indices, draw p_c ~ Dir(alpha * 1_K) and cut the shuffled
    list at ``floor(cumsum(p_c)[:-1] * n_c)`` (the rounding of NIID-Bench, Li et al. 2022; scheme of
    Yurochkin et al. 2019 and Wang et al. 2020). Client k's indices are its chunks in class order.

    This is NOT the legate2023/FedCOF split (that is :func:`dirichlet`, per-client proportions; the
    label model of Hsu et al. 2019). FedCOF's unused ``old_partition_dataset_by_dirichlet`` is this scheme
    with a different rounding (truncate each share, remainder to the last client).

    ``min_size`` reproduces NIID-Bench's ``min_require_size`` option (it uses 10): redraw the whole
    partition until every client has at least ``min_size`` samples, at most ``max_tries`` times
    (:class:`ConfigError` after that). The default 0 draws once.
    """
    y = _as_labels(labels)
    seed = check_seed(seed)
    k_total = _num_clients(num_clients, y.size)
    a = _alpha(alpha)
    c_total = _num_classes(y, num_classes)
    if isinstance(min_size, bool) or not isinstance(min_size, numbers.Integral) or min_size < 0:
        raise ConfigError(f"min_size must be a non-negative integer, got {min_size!r}")
    if min_size * k_total > y.size:
        raise ConfigError(
            f"min_size={min_size} x num_clients={k_total} exceeds the {y.size} samples", "lower min_size"
        )
    tries = _positive_int(max_tries, "max_tries")
    rng = numpy_rng(seed, "partition")
    pool, counts, offsets = _class_pools(y, c_total)
    for _ in range(tries):
        chunks: list[list[np.ndarray]] = [[] for _ in range(k_total)]
        for c in range(c_total):
            idx = rng.permutation(pool[offsets[c] : offsets[c] + counts[c]])
            p = rng.dirichlet(np.full(k_total, a))
            cuts = (np.cumsum(p) * counts[c]).astype(np.int64)[:-1]
            for k, part in enumerate(np.split(idx, cuts)):
                chunks[k].append(part)
        clients = [np.concatenate(ch) if ch else np.empty(0, np.int64) for ch in chunks]
        if min(c.size for c in clients) >= min_size:
            return Partition(
                clients=tuple(clients),
                scheme="dirichlet_per_class",
                params={
                    "num_clients": k_total,
                    "alpha": a,
                    "num_classes": c_total,
                    "min_size": int(min_size),
                    "max_tries": tries,
                },
                seed=seed,
            )
    raise ConfigError(
        f"dirichlet_per_class: no draw in max_tries={tries} gave every client >= min_size={min_size} samples",
        "lower min_size, raise alpha or raise max_tries",
    )


# --------------------------------------------------------------------------------------------------
# iid
# --------------------------------------------------------------------------------------------------


@register_partitioner("iid")
def iid(labels: npt.ArrayLike, seed: int, *, num_clients: int) -> Partition:
    """Shuffled equal split: a random permutation cut into K parts whose sizes differ by at most one.

    Every sample is assigned; the first ``N mod K`` clients get one extra sample (``numpy.array_split``).
    """
    y = _as_labels(labels)
    seed = check_seed(seed)
    k_total = _num_clients(num_clients, y.size)
    perm = numpy_rng(seed, "partition").permutation(y.size).astype(np.int64)
    return Partition(
        clients=tuple(np.array_split(perm, k_total)),
        scheme="iid",
        params={"num_clients": k_total},
        seed=seed,
    )


# --------------------------------------------------------------------------------------------------
# natural users
# --------------------------------------------------------------------------------------------------


@register_partitioner("natural")
def natural(labels: npt.ArrayLike, seed: int | None = None, *, user_ids: npt.ArrayLike) -> Partition:
    """Natural users: one client per distinct user id, clients sorted by user id (fedcof §5, iNat-120k).

    ``user_ids[i]`` is the user of sample i (integers or strings, e.g. the ``user_id`` column of
    iNaturalist-User-120k's ``federated_train_user_120k.csv``, Hsu et al. 2020). Each client's indices
    are in dataset order. No randomness: ``seed`` is ignored and recorded as ``None``.
    ``extras["user_ids"]`` lists the user id of each client.
    """
    y = _as_labels(labels)
    users = np.asarray(user_ids)
    if users.ndim != 1 or users.size != y.size:
        raise ConfigError(
            f"user_ids must be 1-D with one entry per sample ({y.size}), got shape {users.shape}",
            "pass the per-sample user id column",
        )
    if users.dtype.kind == "O":  # e.g. a pandas string column
        values = users.tolist()
        if all(isinstance(v, str) for v in values):
            users = np.asarray(values, dtype=str)
        elif all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
            users = np.asarray(values, dtype=np.int64)
    if users.dtype.kind not in "iuUS":
        raise ConfigError(f"user_ids must be all integers or all strings, got dtype {users.dtype}")
    uniq, inverse = np.unique(users, return_inverse=True)
    order = np.argsort(inverse.ravel(), kind="stable").astype(np.int64)
    sizes = np.bincount(inverse.ravel(), minlength=uniq.size)
    clients = np.split(order, np.cumsum(sizes)[:-1])
    ids = [u.decode() if isinstance(u, bytes) else u for u in uniq.tolist()]
    return Partition(
        clients=tuple(clients),
        scheme="natural",
        params={"num_clients": int(uniq.size)},
        seed=None,
        extras={"user_ids": ids},
    )
