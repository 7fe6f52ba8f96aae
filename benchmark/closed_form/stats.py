"""What clients compute and send: one message dataclass per protocol, and the loop that runs them.

Every closed-form method is a pair (client statistic, server). Clients see only their own rows of the
cached feature matrix; the server sees only the messages below. Each message reports the number of
floats it carries (:meth:`uplink_floats`), so the cost model counts exactly what the protocol sends
(class ids and integer counts are counted as floats too, since the papers send them as tensors).

Protocols (papers-code.md sections 1.4, 2.4, 3):

* :class:`ClassSumsMessage` - FedNCM (legate2023 Alg. 1): per-class feature sums and counts.
* :class:`ClassMeansMessage` - FedCOF (fedcof Alg. 1): per-class means and counts; with ``subsets=g``
  several means of random disjoint subsets per class, and optionally noisy counts (fedcof App. N).
* :class:`GramMessage` - Fed3R as re-implemented in the fedcof repo: ``G_k = F_k^T F_k`` and class sums.
* :class:`AugmentedGramMessage` - official Fed3R: ``A_k = sum x~ x~^T`` with ``x~ = [x; 1]`` and the dense
  ``(d+1) x C`` matrix ``b_k = sum x~ onehot(y)^T``.
* :class:`ClassCovarianceMessage` - FedCOF oracle (fedcof App. G): class means, counts and unbiased class
  covariances (full, diagonal or spherical).

An empty client sends nothing (``uplink_floats() == 0``) and contributes nothing to any server.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from benchmark.closed_form.heads import LinearHead
from benchmark.errors import ConfigError

CovarianceKind = Literal["full", "diagonal", "spherical"]
COVARIANCE_KINDS: tuple[str, ...] = ("full", "diagonal", "spherical")

# ------------------------------------------------------------------------------------------------
# input validation


def check_inputs(
    features: np.ndarray, labels: np.ndarray, num_classes: int, clients: Sequence[np.ndarray]
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Validate the cached features, labels and client partition; return them as typed arrays.

    ``clients`` must be disjoint index arrays into ``features`` (empty clients allowed; rows that no
    client holds are simply unused). Every violation raises :class:`ConfigError` naming the field.
    """
    features = np.asarray(features)
    labels = np.asarray(labels)
    if features.ndim != 2:
        raise ConfigError(f"features must be (N, d), got shape {features.shape}", "pass a 2-D feature matrix")
    if not np.issubdtype(features.dtype, np.floating):
        raise ConfigError(f"features must be floating point, got {features.dtype}", "cast to float32")
    if labels.shape != (features.shape[0],):
        raise ConfigError(
            f"labels shape {labels.shape} does not match features {features.shape}", "pass one label per row"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise ConfigError(f"labels must be integers, got {labels.dtype}", "cast labels to int64")
    if int(num_classes) < 1:
        raise ConfigError(f"num_classes must be >= 1, got {num_classes}", "pass the dataset's class count")
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise ConfigError(
            f"labels must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]",
            "check num_classes and the label encoding",
        )
    if not np.all(np.isfinite(features)):
        raise ConfigError("features contain NaN or inf", "re-extract the feature cache")
    out: list[np.ndarray] = []
    seen = np.zeros(features.shape[0], dtype=bool)
    for k, idx in enumerate(clients):
        idx = np.asarray(idx)
        if idx.size == 0:
            out.append(np.zeros(0, dtype=np.int64))
            continue
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
            raise ConfigError(f"clients[{k}] must be a 1-D integer index array", "pass index arrays")
        if idx.min() < 0 or idx.max() >= features.shape[0]:
            raise ConfigError(
                f"clients[{k}] has indices outside [0, {features.shape[0]})", "fix the partition"
            )
        if np.any(seen[idx]) or len(np.unique(idx)) != len(idx):
            raise ConfigError(
                f"clients[{k}] repeats a sample held by itself or another client", "fix the partition"
            )
        seen[idx] = True
        out.append(idx.astype(np.int64, copy=False))
    if not out:
        raise ConfigError("clients is empty", "pass at least one client index array")
    if not seen.any():
        raise ConfigError("no client holds any sample", "check the partition (all clients are empty)")
    return features, labels.astype(np.int64, copy=False), out


def client_rng(seed: int, client: int, stream: int) -> np.random.Generator:
    """Generator of client ``client`` for random stream ``stream`` (0: subsets, 1: count noise).

    Derived from ``(seed, client, stream)`` only, so a client's message does not depend on the order or
    round in which it is asked (one-shot and multi-round runs see identical messages).
    """
    return np.random.default_rng([int(seed), int(client), int(stream)])


def _group_by_class(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, classes, starts): rows ``order[starts[i]:starts[i+1]]`` have label ``classes[i]``."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    boundaries = np.flatnonzero(np.diff(sorted_labels)) + 1
    starts = np.concatenate(([0], boundaries)).astype(np.int64)
    return order, sorted_labels[starts], starts


def _rows_by_class(x: np.ndarray, labels: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(class, rows of x with that label) for each present class, classes ascending."""
    if len(labels) == 0:
        return
    order, classes, starts = _group_by_class(labels)
    ends = np.append(starts[1:], len(labels))
    for c, s, e in zip(classes, starts, ends, strict=True):
        yield int(c), x[order[s:e]]


def _class_sums(x: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(classes, sums (m, d), counts (m,)) of the rows of ``x`` grouped by label, classes ascending."""
    if len(labels) == 0:
        return np.zeros(0, np.int64), np.zeros((0, x.shape[1]), x.dtype), np.zeros(0, np.int64)
    order, classes, starts = _group_by_class(labels)
    sums = np.add.reduceat(x[order], starts, axis=0)
    counts = np.diff(np.concatenate((starts, [len(labels)])))
    return classes.astype(np.int64), sums, counts.astype(np.int64)


@dataclass(frozen=True, eq=False)
class ClientMoments:
    """A client's first and second moments in one dtype: present classes, class sums, counts, and (when
    asked for) the Gram ``F_k^T F_k``.

    FedNCM's, FedCOF's (one mean per class) and both Fed3R forms' messages are functions of these, so when
    several methods run on the same partition (:func:`federate_jointly`) each client computes them once
    and answers every method from them; the messages are the same as when each method runs alone.
    """

    classes: np.ndarray  # (m,) int64, ascending
    sums: np.ndarray  # (m, d)
    counts: np.ndarray  # (m,) int64
    gram: np.ndarray | None = None  # (d, d)


def client_moments(x: np.ndarray, y: np.ndarray, dtype: np.dtype, *, gram: bool = False) -> ClientMoments:
    """Class sums and counts of a client's rows in ``dtype``, and ``x^T x`` if ``gram``."""
    x = np.ascontiguousarray(x, dtype=dtype)
    classes, sums, counts = _class_sums(x, y)
    return ClientMoments(classes, sums, counts, (x.T @ x) if gram else None)


# ------------------------------------------------------------------------------------------------
# messages


@dataclass(frozen=True, eq=False)
class ClassSumsMessage:
    """FedNCM (legate2023 Alg. 1, line 14): ``m_c = sum_{x in X_c} f(x)`` and ``|X_c|`` per present class."""

    client: int
    classes: np.ndarray  # (m,) int64
    sums: np.ndarray  # (m, d)
    counts: np.ndarray  # (m,) int64

    def uplink_floats(self) -> int:
        """``m * (d + 1)``: one sum and one count per present class."""
        return int(self.sums.size + self.counts.size)


@dataclass(frozen=True, eq=False)
class ClassMeansMessage:
    """FedCOF (fedcof Alg. 1, client side): one mean and count per sent (class, subset).

    ``classes`` may repeat a class when the client sends several subset means (``subsets=g``). ``counts``
    is float64 because noisy counts (fedcof App. N) are real numbers.
    """

    client: int
    classes: np.ndarray  # (m,) int64
    means: np.ndarray  # (m, d)
    counts: np.ndarray  # (m,) float64

    def uplink_floats(self) -> int:
        """``m * (d + 1)``: one mean and one count per sent mean."""
        return int(self.means.size + self.counts.size)


@dataclass(frozen=True, eq=False)
class GramMessage:
    """Fed3R in the fedcof repo (papers-code.md 2.4): ``G_k = F_k^T F_k`` and per-class sums."""

    client: int
    gram: np.ndarray  # (d, d)
    classes: np.ndarray  # (m,) int64
    sums: np.ndarray  # (m, d)

    def uplink_floats(self, symmetric: bool = False) -> int:
        """``d^2 + m d`` (``d (d+1) / 2 + m d`` when the symmetric Gram is sent as a triangle)."""
        d = self.gram.shape[0]
        return int((d * (d + 1) // 2 if symmetric else d * d) + self.sums.size)


@dataclass(frozen=True, eq=False)
class AugmentedGramMessage:
    """Official Fed3R (papers-code.md 3): ``A_k = X~^T X~``, dense ``b_k = X~^T Y``, ``X~ = [X, 1]``."""

    client: int
    a: np.ndarray  # (d + 1, d + 1)
    b: np.ndarray  # (d + 1, C)

    def uplink_floats(self, symmetric: bool = False) -> int:
        """``(d+1)^2 + (d+1) C`` (the official code sends ``b`` dense over all classes)."""
        d1 = self.a.shape[0]
        return int((d1 * (d1 + 1) // 2 if symmetric else d1 * d1) + self.b.size)


@dataclass(frozen=True, eq=False)
class ClassCovarianceMessage:
    """FedCOF oracle (fedcof App. G): class means, counts and unbiased class covariances.

    ``covariances`` is (m, d, d) for ``kind="full"``, (m, d) (the diagonal) for ``"diagonal"`` and (m,)
    (the mean of the diagonal) for ``"spherical"`` (fedcof App. L, Fig. 8 right). A class with one sample
    has no unbiased covariance; it is sent as zeros and gets weight ``n - 1 = 0`` in Eq. 25.
    """

    client: int
    classes: np.ndarray  # (m,) int64
    means: np.ndarray  # (m, d)
    counts: np.ndarray  # (m,) int64
    covariances: np.ndarray
    kind: CovarianceKind = "full"

    def uplink_floats(self, symmetric: bool = False) -> int:
        """``m (d + 1)`` plus ``m d^2`` (full; ``m d (d+1)/2`` if symmetric), ``m d`` or ``m`` floats."""
        m, d = self.means.shape
        cov = self.covariances.size
        if self.kind == "full" and symmetric:
            cov = m * d * (d + 1) // 2
        return int(self.means.size + self.counts.size + cov)


Message = ClassSumsMessage | ClassMeansMessage | GramMessage | AugmentedGramMessage | ClassCovarianceMessage


# ------------------------------------------------------------------------------------------------
# client computations


def class_sums_message(
    client: int, x: np.ndarray, y: np.ndarray, dtype: np.dtype, moments: ClientMoments | None = None
) -> ClassSumsMessage:
    """FedNCM client (legate2023 Alg. 1 ``LocalClientStats``): class sums and counts in ``dtype``.

    ``moments``: this client's :class:`ClientMoments` in ``dtype`` when already computed.
    """
    m = moments if moments is not None else client_moments(x, y, dtype)
    return ClassSumsMessage(client, m.classes, m.sums, m.counts)


@dataclass(frozen=True)
class CountNoise:
    """Noisy class counts (fedcof App. N, Eq. 26): ``n~ = max(n + sigma, 0)``; ``n~ = 0`` drops the class.

    * ``uniform``: ``sigma ~ U(-(1 - eps) n, +(1 - eps) n)``, needs ``0 < eps <= 1`` (``eps = 1``: no noise).
    * ``gaussian``: ``sigma ~ N(0, 1/eps)``. The paper writes ``N(0, 1/eps)``; by the usual convention the
      second argument is the variance (``gaussian_param="variance"``, default); ``"std"`` reads it as the
      standard deviation. ``eps = inf`` gives no noise.
    * ``laplace``: ``sigma ~ Laplace(0, b = 1/eps)`` (scale parameter, the Laplace mechanism's). ``eps = inf``
      gives no noise.

    A clipped class (``n + sigma <= 0``) is not sent: neither its mean nor its count reach the server. The
    mean of a sent class is the true mean; only its count is perturbed, and the server uses the noisy count
    everywhere (class means, Eq. 7 weights, N_c, B). The paper does not say whether noisy counts are
    rounded; ``round_counts=False`` (default) keeps them real, ``True`` rounds to the nearest integer
    before clipping. The paper's grid is ``eps in {0.1, 0.3, 0.5, 0.7, 0.9}`` (Fig. 9).
    """

    kind: Literal["uniform", "gaussian", "laplace"]
    epsilon: float
    gaussian_param: Literal["variance", "std"] = "variance"
    round_counts: bool = False

    def __post_init__(self) -> None:
        if self.kind not in ("uniform", "gaussian", "laplace"):
            raise ConfigError(f"CountNoise.kind {self.kind!r} unknown", "use uniform, gaussian or laplace")
        if self.gaussian_param not in ("variance", "std"):
            raise ConfigError(f"CountNoise.gaussian_param {self.gaussian_param!r}", "use variance or std")
        if not self.epsilon > 0:
            raise ConfigError(
                f"CountNoise.epsilon must be > 0, got {self.epsilon}", "the paper uses 0.1..0.9"
            )
        if self.kind == "uniform" and self.epsilon > 1:
            raise ConfigError(
                f"CountNoise.epsilon must be <= 1 for uniform noise, got {self.epsilon}", "use (0, 1]"
            )

    def perturb(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy counts ``max(n + sigma, 0)`` (float64); zero marks a class the client does not send."""
        n = np.asarray(counts, dtype=np.float64)
        if self.kind == "uniform":
            half = (1.0 - self.epsilon) * n
            sigma = rng.uniform(-half, half) if n.size else n.copy()
        elif self.kind == "gaussian":
            scale = (1.0 / self.epsilon) if self.gaussian_param == "std" else math.sqrt(1.0 / self.epsilon)
            sigma = rng.normal(0.0, scale, size=n.shape)
        else:
            sigma = rng.laplace(0.0, 1.0 / self.epsilon, size=n.shape)
        noisy = n + sigma
        if self.round_counts:
            noisy = np.rint(noisy)
        return np.maximum(noisy, 0.0)


def subset_split(n: int, subsets: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Random disjoint subsets of ``range(n)`` for ``subsets=g`` means per class (fedcof Fig. 5, 8, Table 5).

    As the reference (``Init_FT_LP/sync_trainer_round.py``): a class with ``n >= 4`` samples is split into
    ``g' = min(g, floor(n / 2))`` subsets of a random permutation; the first ``g' - 1`` have
    ``floor(n / g')`` samples, the last one takes the rest. Otherwise one subset with all samples.
    """
    if subsets <= 1 or n < 4:
        return [np.arange(n)]
    g = min(subsets, n // 2)
    size = n // g
    perm = rng.permutation(n)
    return [perm[i * size : (i + 1) * size] for i in range(g - 1)] + [perm[(g - 1) * size :]]


def class_means_message(
    client: int,
    x: np.ndarray,
    y: np.ndarray,
    dtype: np.dtype,
    *,
    subsets: int = 1,
    noise: CountNoise | None = None,
    seed: int = 0,
    moments: ClientMoments | None = None,
) -> ClassMeansMessage:
    """FedCOF client (fedcof Alg. 1): class means and counts, optionally subset means and noisy counts.

    ``moments``: this client's :class:`ClientMoments` in ``dtype`` when already computed (used when
    ``subsets == 1``; subset means need the rows).
    """
    d = x.shape[1]
    if subsets <= 1:
        m = moments if moments is not None else client_moments(x, y, dtype)
        classes = m.classes
        means = m.sums / m.counts[:, None].astype(dtype) if len(classes) else m.sums
        counts_f = m.counts.astype(np.float64)
    else:
        x = np.asarray(x, dtype=dtype)
        rng = client_rng(seed, client, 0)
        c_list: list[int] = []
        m_list: list[np.ndarray] = []
        n_list: list[int] = []
        for c, rows in _rows_by_class(x, y):
            for part in subset_split(len(rows), subsets, rng):
                c_list.append(c)
                m_list.append(rows[part].mean(0, dtype=dtype))
                n_list.append(len(part))
        classes = np.asarray(c_list, dtype=np.int64)
        means = np.stack(m_list).astype(dtype) if m_list else np.zeros((0, d), dtype)
        counts_f = np.asarray(n_list, dtype=np.float64)
    if noise is not None and len(classes):
        counts_f = noise.perturb(counts_f, client_rng(seed, client, 1))
        keep = counts_f > 0
        classes, means, counts_f = classes[keep], means[keep], counts_f[keep]
    return ClassMeansMessage(client, classes, means, counts_f)


def gram_message(
    client: int, x: np.ndarray, y: np.ndarray, dtype: np.dtype, moments: ClientMoments | None = None
) -> GramMessage:
    """Fed3R client, fedcof re-implementation: ``G_k = F_k^T F_k`` and class sums ``B_k``.

    ``moments``: this client's :class:`ClientMoments` in ``dtype`` with its Gram, when already computed.
    """
    m = (
        moments
        if moments is not None and moments.gram is not None
        else client_moments(x, y, dtype, gram=True)
    )
    assert m.gram is not None
    return GramMessage(client, m.gram, m.classes, m.sums)


def augmented_gram_message(
    client: int,
    x: np.ndarray,
    y: np.ndarray,
    num_classes: int,
    dtype: np.dtype,
    moments: ClientMoments | None = None,
) -> AugmentedGramMessage:
    """Official Fed3R client (``fed3r_step``): ``A_k = X~^T X~``, ``b_k = X~^T onehot(y)``, X~ = [X, 1].

    Built from the client's moments without materialising ``X~``: ``A_k = [[G_k, s_k], [s_k^T, n_k]]``
    with ``s_k`` the sum of the rows and ``n_k`` their number; ``b_k`` stacks the class sums over the
    class counts (zero columns for absent classes).
    """
    m = (
        moments
        if moments is not None and moments.gram is not None
        else client_moments(x, y, dtype, gram=True)
    )
    assert m.gram is not None
    d = m.gram.shape[0]
    a = np.empty((d + 1, d + 1), dtype=dtype)
    a[:d, :d] = m.gram
    total = m.sums.sum(axis=0)
    a[:d, d] = total
    a[d, :d] = total
    a[d, d] = m.counts.sum()
    b = np.zeros((d + 1, num_classes), dtype=dtype)
    b[:d, m.classes] = m.sums.T
    b[d, m.classes] = m.counts
    return AugmentedGramMessage(client, a, b)


def class_covariance_message(
    client: int, x: np.ndarray, y: np.ndarray, dtype: np.dtype, kind: CovarianceKind = "full"
) -> ClassCovarianceMessage:
    """FedCOF-oracle client (fedcof App. G): means, counts and unbiased (ddof=1) class covariances.

    ``kind="diagonal"`` sends only the variances, ``"spherical"`` their mean (fedcof App. L, Fig. 8).
    """
    if kind not in COVARIANCE_KINDS:
        raise ConfigError(f"covariance {kind!r} unknown", f"use one of: {', '.join(COVARIANCE_KINDS)}")
    x = np.asarray(x, dtype=dtype)
    d = x.shape[1]
    classes, sums, counts = _class_sums(x, y)
    means = sums / counts[:, None].astype(dtype) if len(classes) else sums
    shape = {"full": (len(classes), d, d), "diagonal": (len(classes), d), "spherical": (len(classes),)}[kind]
    covs = np.zeros(shape, dtype=dtype)
    for i, (_, rows) in enumerate(_rows_by_class(x, y)):
        if len(rows) < 2:
            continue
        centred = rows - means[i]
        if kind == "full":
            covs[i] = centred.T @ centred / (len(rows) - 1)
        else:
            var = np.einsum("nd,nd->d", centred, centred) / (len(rows) - 1)
            covs[i] = var if kind == "diagonal" else var.mean()
    return ClassCovarianceMessage(client, classes, means, counts, covs, kind)


# ------------------------------------------------------------------------------------------------
# running the clients


class Server(Protocol):
    """A closed-form server: fold client messages in with :meth:`add`, read the head with :meth:`head`."""

    def add(self, message: Message) -> None: ...

    def head(self) -> LinearHead: ...


RoundCallback = Callable[[int, LinearHead], None]


def federate(
    features: np.ndarray,
    labels: np.ndarray,
    clients: Sequence[np.ndarray],
    make_message: Callable[[int, np.ndarray, np.ndarray], Message],
    server: Server,
    rounds: Sequence[np.ndarray] | None = None,
    on_round: RoundCallback | None = None,
) -> tuple[LinearHead, np.ndarray]:
    """Run the clients of each round, fold their messages into ``server``, return (final head, uplink).

    ``rounds`` lists, per round, the indices of the clients that send in that round (each client at most
    once overall; ``None``: one round with every client in index order). After each round the head is
    computed from all messages received so far (fedcof Sec. 4.3 "FedCOF in multiple rounds") and passed to
    ``on_round(round_index, head)``. Empty clients send nothing. Returns the uplink floats per client
    (zero for clients that never sent).
    """
    if rounds is None:
        rounds = [np.arange(len(clients))]
    uplink = np.zeros(len(clients), dtype=np.int64)
    sent = np.zeros(len(clients), dtype=bool)
    head: LinearHead | None = None
    for r, members in enumerate(rounds):
        for k in np.asarray(members, dtype=np.int64):
            if sent[k]:
                raise ConfigError(f"client {k} is scheduled twice", "each client sends its statistics once")
            sent[k] = True
            idx = clients[k]
            if len(idx) == 0:
                continue
            msg = make_message(int(k), features[idx], labels[idx])
            uplink[k] = msg.uplink_floats()
            server.add(msg)
        head = server.head()
        if on_round is not None:
            on_round(r, head)
    if head is None:
        raise ConfigError("no rounds to run", "pass at least one round")
    return head, uplink


# ------------------------------------------------------------------------------------------------
# several methods on one partition


@dataclass(eq=False)
class MethodPlan:
    """One federated closed-form method ready to run on a partition.

    ``server`` folds the messages in; clients compute in ``dtype``; ``message(k, x, y, moments)`` builds
    client ``k``'s message from its rows ``(x, y)`` and its :class:`ClientMoments` in ``dtype`` (with the
    Gram when ``needs_gram``; ``None`` when ``needs_moments`` is false); ``extra()`` reports what the fit
    adds to :class:`~benchmark.closed_form.registry.FitOutput` once every client has sent.
    """

    server: Server
    dtype: np.dtype
    message: Callable[[int, np.ndarray, np.ndarray, ClientMoments | None], Message]
    needs_moments: bool = True
    needs_gram: bool = False
    extra: Callable[[], dict[str, object]] = dict

    def client_message(self, client: int, x: np.ndarray, y: np.ndarray) -> Message:
        """The message of one client running this method alone (it computes its own moments)."""
        moments = client_moments(x, y, self.dtype, gram=self.needs_gram) if self.needs_moments else None
        return self.message(client, x, y, moments)


def federate_plan(
    features: np.ndarray,
    labels: np.ndarray,
    clients: Sequence[np.ndarray],
    plan: MethodPlan,
    rounds: Sequence[np.ndarray] | None = None,
    on_round: RoundCallback | None = None,
) -> tuple[LinearHead, np.ndarray]:
    """:func:`federate` for one :class:`MethodPlan`."""
    return federate(features, labels, clients, plan.client_message, plan.server, rounds, on_round)


@dataclass(frozen=True, eq=False)
class JointOutcome:
    """What :func:`federate_jointly` returns per method: head, uplink floats per client, seconds spent."""

    head: LinearHead
    uplink: np.ndarray
    seconds: float


def federate_jointly(
    features: np.ndarray,
    labels: np.ndarray,
    clients: Sequence[np.ndarray],
    plans: dict[str, MethodPlan],
) -> tuple[dict[str, JointOutcome], dict[str, float]]:
    """Run several one-shot methods in one pass over the clients (all clients, one round).

    Each client computes its :class:`ClientMoments` once per dtype that the plans use (with its Gram if
    any plan of that dtype needs it) and answers every method from them; each method's server sees exactly
    the messages it would see running alone. Returns, per method, its head, uplink floats per client and
    the seconds spent on its own messages, server and head; and, per dtype name, the seconds spent on the
    shared moments.
    """
    uplink = {name: np.zeros(len(clients), dtype=np.int64) for name in plans}
    spent = dict.fromkeys(plans, 0.0)
    dtypes = {p.dtype for p in plans.values() if p.needs_moments}
    wants_gram = {dt: any(p.needs_gram for p in plans.values() if p.dtype == dt) for dt in dtypes}
    shared = {dt.name: 0.0 for dt in dtypes}
    for k, idx in enumerate(clients):
        if len(idx) == 0:
            continue
        x, y = features[idx], labels[idx]
        moments: dict[np.dtype, ClientMoments] = {}
        for dt in dtypes:
            t0 = time.perf_counter()
            moments[dt] = client_moments(x, y, dt, gram=wants_gram[dt])
            shared[dt.name] += time.perf_counter() - t0
        for name, plan in plans.items():
            t0 = time.perf_counter()
            msg = plan.message(k, x, y, moments[plan.dtype] if plan.needs_moments else None)
            uplink[name][k] = msg.uplink_floats()
            plan.server.add(msg)
            spent[name] += time.perf_counter() - t0
    out: dict[str, JointOutcome] = {}
    for name, plan in plans.items():
        t0 = time.perf_counter()
        head = plan.server.head()
        out[name] = JointOutcome(head, uplink[name], spent[name] + time.perf_counter() - t0)
    return out, shared
