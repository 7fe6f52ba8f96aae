"""Federated linear probing (and the MLP head of legate2023 Table 5) on cached features, vectorised over clients.

Why this is exact: with a frozen body and frozen augmentation (the reference transforms every image once,
papers-code.md §1.1) and the body in eval mode, client k's features are a fixed tensor, so federated LP is
federated training of the head alone on those tensors. Nothing about the protocol changes: same sampled
clients, same per-client mini-batches in the same order, same SGD / FedProx / momentum step
(:mod:`benchmark.fl.client`), same aggregation and server optimiser (:mod:`benchmark.federated.server_opt`), same
cost accounting (legate2023 Eq. 3 and 6).

Vectorisation: the m clients of a round train *simultaneously*. Their heads are stacked into ``(m, C, d)`` /
``(m, C)`` tensors, the local step s of every client is one batched matmul over an ``(m, B, d)`` stack of
that step's mini-batches, padded to B with a mask where a client's batch is shorter (last batch of an epoch)
and frozen (no update at all) once a client has run out of steps. Each client's loss is its own batch mean,
so the gradient of the summed loss w.r.t. client k's slice is exactly client k's gradient: the result
equals the per-client loop up to floating-point summation order (the tests check ~1e-6 in float32 and
~1e-12 in float64 against :func:`benchmark.fl.engine.run_federated` on an identity body).

The linear head uses a closed-form gradient (``softmax - onehot``); the MLP head uses autograd on the stacked
parameters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import tensors_to
from benchmark.federated.history import RoundStats
from benchmark.federated.loop import RoundTrainer
from benchmark.federated.server_opt import make_server_optimizer
from benchmark.fl.client import batch_schedule
from benchmark.fl.config import FLConfig, HeadKind
from benchmark.fl.engine import RunResult, resolve_device, run_federated, run_stage
from benchmark.models.classifier import Classifier

Backend = Literal["vectorised", "loop"]
_MLP_LAYERS = ("0", "2", "4")


# ------------------------------------------------------------------------------------------------ data
@dataclass(frozen=True)
class CachedFeatures:
    """Frozen-body features of one run: the pooled train set, each client's row indices, the test set.

    ``client_indices[k]`` indexes rows of ``train_x`` / ``train_y`` (a partition refers to the cache, it
    never copies it). Labels are ``int64`` class ids in ``[0, num_classes)``.
    """

    train_x: torch.Tensor
    train_y: torch.Tensor
    client_indices: Sequence[np.ndarray]
    test_x: torch.Tensor
    test_y: torch.Tensor
    num_classes: int | None = None
    """C; ``None`` = 1 + the largest label seen in train or test."""

    def __post_init__(self) -> None:
        for name in ("train", "test"):
            x, y = getattr(self, f"{name}_x"), getattr(self, f"{name}_y")
            if x.dim() != 2 or not x.is_floating_point():
                raise ConfigError(
                    f"{name}_x must be a 2-D float tensor, got shape {tuple(x.shape)}", "(N, d)"
                )
            if y.dim() != 1 or y.shape[0] != x.shape[0] or y.dtype != torch.long:
                raise ConfigError(
                    f"{name}_y must be int64 of shape ({x.shape[0]},)", "pass labels as torch.long"
                )
        if self.test_x.shape[1] != self.train_x.shape[1]:
            raise ConfigError("test_x and train_x have different feature dimensions", "use one cache")
        n = self.train_x.shape[0]
        for k, idx in enumerate(self.client_indices):
            a = np.asarray(idx)
            if a.ndim != 1 or (a.size and (a.min() < 0 or a.max() >= n)):
                raise ConfigError(f"client_indices[{k}] must be 1-D indices into train_x (0..{n - 1})", "")

    @property
    def feature_dim(self) -> int:
        """d."""
        return int(self.train_x.shape[1])

    @property
    def classes(self) -> int:
        """C (given, else inferred from the labels)."""
        if self.num_classes is not None:
            return int(self.num_classes)
        return int(torch.cat([self.train_y, self.test_y]).max()) + 1

    def client_sizes(self) -> np.ndarray:
        """n_k for every client."""
        return np.array([len(i) for i in self.client_indices], dtype=np.int64)


# ------------------------------------------------------------------------------------------------ heads
def init_head_state(
    kind: HeadKind, d: int, num_classes: int, rng: np.random.Generator, hidden: int | None = None
) -> dict[str, np.ndarray]:
    """PyTorch's default ``nn.Linear`` init for the head, drawn from ``rng`` (float32).

    Every weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (``kaiming_uniform_(a=sqrt(5))`` and the bias
    rule of ``nn.Linear.reset_parameters``), i.e. the random head of the legate2023 reference for LP / FT.
    ``mlp``: Linear(d, h) - ReLU - Linear(h, h) - ReLU - Linear(h, C), h = ``hidden`` or d (legate2023 App.
    C.1 does not give h). Keys follow ``nn.Linear`` / ``nn.Sequential`` state-dict names.
    """
    dims = (
        [(d, num_classes)]
        if kind == "linear"
        else [(d, hidden or d), (hidden or d, hidden or d), (hidden or d, num_classes)]
    )
    names = [""] if kind == "linear" else [f"{i}." for i in _MLP_LAYERS]
    out: dict[str, np.ndarray] = {}
    for prefix, (fan_in, fan_out) in zip(names, dims, strict=True):
        bound = 1.0 / np.sqrt(fan_in)
        out[f"{prefix}weight"] = rng.uniform(-bound, bound, size=(fan_out, fan_in)).astype(np.float32)
        out[f"{prefix}bias"] = rng.uniform(-bound, bound, size=(fan_out,)).astype(np.float32)
    return out


def head_kind_of(state: Mapping[str, np.ndarray]) -> HeadKind:
    """``linear`` or ``mlp`` from the state-dict keys (raises on anything else)."""
    keys = set(state)
    if keys == {"weight", "bias"}:
        return "linear"
    if keys == {f"{i}.{p}" for i in _MLP_LAYERS for p in ("weight", "bias")}:
        return "mlp"
    raise ConfigError(f"unrecognised head state keys {sorted(keys)}", "use init_head_state(...) keys")


def head_module(state: Mapping[str, np.ndarray], dtype: torch.dtype = torch.float32) -> nn.Module:
    """An ``nn.Linear`` or MLP ``nn.Sequential`` holding ``state`` (the per-client loop's head)."""
    if head_kind_of(state) == "linear":
        c, d = state["weight"].shape
        mod: nn.Module = nn.Linear(d, c)
    else:
        h, d = state["0.weight"].shape
        c = state["4.weight"].shape[0]
        mod = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, c))
    mod.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in state.items()})
    return mod.to(dtype)


def _forward(params: Mapping[str, torch.Tensor], x: torch.Tensor, kind: HeadKind) -> torch.Tensor:
    """Batched head: params ``(M, out, in)`` / ``(M, out)``, x ``(M, B, d)`` -> logits ``(M, B, C)``."""
    if kind == "linear":
        return torch.baddbmm(params["bias"].unsqueeze(1), x, params["weight"].transpose(1, 2))
    h = x
    for j, layer in enumerate(_MLP_LAYERS):
        h = torch.baddbmm(params[f"{layer}.bias"].unsqueeze(1), h, params[f"{layer}.weight"].transpose(1, 2))
        if j < len(_MLP_LAYERS) - 1:
            h = torch.relu(h)
    return h


# ------------------------------------------------------------------------------------------------ trainer
class FeatureTrainer(RoundTrainer):
    """:class:`benchmark.federated.loop.RoundTrainer` for a head trained on cached features, all clients of a
    round at once (module docstring)."""

    def __init__(
        self,
        feats: CachedFeatures,
        cfg: FLConfig,
        head: Mapping[str, np.ndarray],
        *,
        communicate: bool = True,
    ) -> None:
        if len(feats.client_indices) != cfg.num_clients:
            raise ConfigError(
                f"cache has {len(feats.client_indices)} clients but num_clients={cfg.num_clients}",
                "set num_clients to the partition's client count",
            )
        self.cfg = cfg
        self.kind = head_kind_of(head)
        self.device = resolve_device(cfg)
        self.dtype = feats.train_x.dtype
        self.x = feats.train_x.to(self.device)
        self.y = feats.train_y.to(self.device)
        self.test_x = feats.test_x.to(self.device)
        self.test_y = feats.test_y.to(self.device)
        self.client_idx = [np.asarray(i, dtype=np.int64) for i in feats.client_indices]
        self.num_clients = cfg.num_clients
        self.params = {
            k: torch.as_tensor(np.asarray(v)).to(device=self.device, dtype=self.dtype).clone()
            for k, v in head.items()
        }
        self.server_opt = make_server_optimizer(cfg)
        self.floats = sum(int(p.numel()) for p in self.params.values())
        self.communicate = communicate

    # -- one round -------------------------------------------------------------------------------------
    def _schedule(self, round_idx: int, clients: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded global row indices ``(S, M, B)`` and per-step batch sizes ``(S, M)`` of the round."""
        cfg = self.cfg
        scheds = []
        for k in clients:
            rng = cfg.seeds.rng("data_order", int(round_idx), int(k)) if cfg.client_shuffle else None
            scheds.append(batch_schedule(len(self.client_idx[k]), cfg.batch_size, cfg.local_epochs, rng))
        steps = max(len(s) for s in scheds)
        idx = np.zeros((steps, len(clients), cfg.batch_size), dtype=np.int64)
        cnt = np.zeros((steps, len(clients)), dtype=np.int64)
        for j, (k, sched) in enumerate(zip(clients, scheds, strict=True)):
            rows = self.client_idx[k]
            for s, local in enumerate(sched):
                idx[s, j, : len(local)] = rows[local]
                cnt[s, j] = len(local)
        return torch.from_numpy(idx).to(self.device), torch.from_numpy(cnt).to(self.device)

    def _grads(
        self, p: Mapping[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor, weight: torch.Tensor
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Per-client gradients of the per-client batch-mean CE, and the per-client summed CE (masked)."""
        if self.kind == "linear":
            with torch.no_grad():
                # classes on dim 1: W (M, C, d) @ x^T (M, d, B) is the faster bmm layout on CPU
                logits = torch.baddbmm(p["bias"].unsqueeze(2), p["weight"], xb.transpose(1, 2))  # (M, C, B)
                logp = torch.log_softmax(logits, dim=1)
                ce = -logp.gather(1, yb.unsqueeze(1)).squeeze(1)  # (M, B)
                g = logp.exp_()  # softmax
                g.scatter_add_(1, yb.unsqueeze(1), -torch.ones_like(ce).unsqueeze(1))  # - onehot
                g.mul_(weight.unsqueeze(1))  # mask / batch size: d(batch-mean CE)/d logits
                grads = {"weight": torch.bmm(g, xb), "bias": g.sum(2)}
            return grads, ce
        leaves = {k: v.detach().requires_grad_(True) for k, v in p.items()}
        logits = _forward(leaves, xb, "mlp")
        ce = nn.functional.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="none").view_as(yb)
        names = list(leaves)
        gs = torch.autograd.grad((ce * weight).sum(), [leaves[k] for k in names])
        return dict(zip(names, gs, strict=True)), ce.detach()

    def _sgd_step(
        self, name: str, w: torch.Tensor, g: torch.Tensor, rows: torch.Tensor | None, bufs: dict, lr: float
    ) -> None:
        """The step of :mod:`benchmark.fl.client` on the stacked client tensors, in place; ``rows`` = the
        clients that still have a batch at this step (``None``: all of them), the others are left alone."""
        cfg = self.cfg
        wa = w if rows is None else w[rows]
        d = g if rows is None else g[rows]
        if cfg.client_weight_decay != 0.0:
            d = d.add(wa, alpha=cfg.client_weight_decay)
        if cfg.client_momentum != 0.0:
            if name not in bufs:  # step 0: every client of the round has at least one batch
                bufs[name] = d.clone()
                d = bufs[name]
            elif rows is None:
                d = bufs[name].mul_(cfg.client_momentum).add_(d)
            else:
                d = bufs[name][rows].mul_(cfg.client_momentum).add_(d)
                bufs[name][rows] = d
        if cfg.prox_mu != 0.0:
            d = d.add(wa - self.params[name].unsqueeze(0), alpha=cfg.prox_mu)
        if rows is None:
            w.sub_(d, alpha=lr)
        else:
            w[rows] = torch.sub(wa, d, alpha=lr)

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        """All sampled clients' local SGD at once, then the weighted average and the server step."""
        cfg = self.cfg
        active_clients = [int(k) for k in clients if len(self.client_idx[int(k)]) > 0]
        m_all = len(clients)
        if not active_clients:
            return RoundStats(0, float("nan"), m_all * self.floats, m_all * self.floats, 0)
        idx, cnt = self._schedule(round_idx, active_clients)
        steps, m, bsz = idx.shape
        ar = torch.arange(bsz, device=self.device)
        p = {k: v.unsqueeze(0).repeat(m, *([1] * v.dim())).contiguous() for k, v in self.params.items()}
        bufs: dict[str, torch.Tensor] = {}
        loss_sum = torch.zeros(m, dtype=torch.float64, device=self.device)
        for s in range(steps):
            c = cnt[s]
            mask = (ar.unsqueeze(0) < c.unsqueeze(1)).to(self.dtype)  # (M, B)
            weight = mask / c.clamp(min=1).to(self.dtype).unsqueeze(1)
            flat = idx[s].reshape(-1)
            xb = self.x.index_select(0, flat).view(m, bsz, -1)
            yb = self.y.index_select(0, flat).view(m, bsz)
            grads, ce = self._grads(p, xb, yb, weight)
            loss_sum += (ce * mask).sum(1).double()
            rows = None if bool((c > 0).all()) else torch.nonzero(c > 0).squeeze(1)
            with torch.no_grad():
                for k, w in p.items():
                    self._sgd_step(k, w, grads[k], rows, bufs, lr)
        processed = cnt.sum(0).to(self.dtype)  # n_k * E
        weights = processed if cfg.aggregation_weights == "examples" else torch.ones_like(processed)
        with torch.no_grad():
            pseudo = {}
            for k, w in p.items():
                wv = weights.view(-1, *([1] * (w.dim() - 1)))
                pseudo[k] = ((self.params[k].unsqueeze(0) - w) * wv).sum(0) / weights.sum()
            self.server_opt.step(self.params, pseudo)
        examples = int(cnt.sum())
        m_comm = m_all if self.communicate else 0
        return RoundStats(
            num_examples=examples,
            train_loss=float(loss_sum.sum() / examples),
            uplink_floats=m_comm * self.floats,
            downlink_floats=m_comm * self.floats,
            compute_f=examples,  # legate2023 Eq. 6: 1F per sample per local epoch for HeadTuning
        )

    # -- evaluation ------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        """Test accuracy and mean CE of the global head on the cached test features."""
        n = self.test_x.shape[0]
        correct, loss = 0, 0.0
        params = {k: v.unsqueeze(0) for k, v in self.params.items()}
        for s in range(0, n, 16384):
            logits = _forward(params, self.test_x[s : s + 16384].unsqueeze(0), self.kind)[0]
            y = self.test_y[s : s + 16384]
            loss += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
        return correct / max(n, 1), loss / max(n, 1)

    def frozen_drift(self) -> float:
        """NaN: no body parameter takes part (its features are fixed by construction)."""
        return float("nan")

    def head_state(self) -> dict[str, np.ndarray]:
        """The global head as numpy arrays."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.params.items()}

    def state_dict(self) -> dict[str, Any]:
        """The global head and the server optimiser state (checkpoints, :mod:`benchmark.federated.checkpoint`)."""
        return {"params": dict(self.params), "server_opt": self.server_opt.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` onto this trainer's device (names, shapes and dtypes must match)."""
        params = state["params"]
        if set(params) != set(self.params):
            raise ConfigError(
                f"head tensors {sorted(params)} differ from this run's {sorted(self.params)}", ""
            )
        for k, v in params.items():
            if v.shape != self.params[k].shape or v.dtype != self.params[k].dtype:
                raise ConfigError(f"head tensor {k!r}: {tuple(v.shape)} {v.dtype} does not fit this run", "")
            self.params[k].copy_(v)
        self.server_opt.load_state_dict(tensors_to(state["server_opt"], self.device))

    def describe(self) -> dict[str, object]:
        """Run metadata."""
        return {
            "device": str(self.device),
            "amp": False,
            "torch": torch.__version__,
            "train_part": "head",
            "backend": "vectorised",
            "head": self.kind,
            "server_opt": self.server_opt.describe(),
            "clients_per_round": self.cfg.clients_per_round,
            "uplink_floats_per_client": self.floats if self.communicate else 0,
            "downlink_floats_per_client": self.floats if self.communicate else 0,
            "f_per_sample": 1,
        }


# ------------------------------------------------------------------------------------------------ entry point
def run_lp_features(
    feats: CachedFeatures,
    cfg: FLConfig,
    head: Mapping[str, np.ndarray],
    *,
    backend: Backend = "vectorised",
    method: str = "lp",
    rounds: int | None = None,
    communicate: bool = True,
    **stage: Any,
) -> RunResult:
    """Federated LP (or MLP head-tuning) on cached features from the head ``head`` (see module docstring).

    ``backend="vectorised"`` trains a round's clients at once; ``"loop"`` runs the plain per-client path of
    :func:`benchmark.fl.engine.run_federated` on an identity body (the reference implementation the
    vectorised one is tested and benchmarked against). Quirks that need the real body
    (``lp_body_mode="train"``, ``frozen_params="server_opt_drift"``) are refused here: use the model path.
    ``rounds`` (default ``cfg.rounds``), ``communicate`` and ``stage`` (``stage``, ``start_round``,
    ``start_costs``, ``history``, ``checkpoint``, ``on_round_end``): :func:`benchmark.fl.engine.run_stage`.
    """
    if cfg.lp_body_mode != "eval":
        raise ConfigError(
            "lp_body_mode='train' (BatchNorm batch statistics during LP) cannot run on cached features",
            "use methods.run_lp(..., model=...) with the body in the loop",
        )
    if cfg.frozen_params != "untouched":
        raise ConfigError(
            "frozen_params='server_opt_drift' moves the body, which cached features do not contain",
            "use methods.run_lp(..., model=...) with the body in the loop",
        )
    if backend == "loop":
        dtype = feats.train_x.dtype
        model = Classifier(nn.Identity(), head_module(head, dtype))  # type: ignore[arg-type]
        clients = [
            TensorDataset(feats.train_x[torch.as_tensor(i)], feats.train_y[torch.as_tensor(i)])
            for i in feats.client_indices
        ]
        test = TensorDataset(feats.test_x, feats.test_y)
        kw = {"train_part": "head", "method": method, "rounds": rounds, "communicate": communicate}
        res = run_federated(model, clients, test, cfg, **kw, **stage)
        res.meta["backend"] = "loop"
        return res
    if backend != "vectorised":
        raise ConfigError(f"unknown LP backend {backend!r}", "use 'vectorised' or 'loop'")
    trainer = FeatureTrainer(feats, cfg, head, communicate=communicate)
    rounds = cfg.rounds if rounds is None else rounds
    return run_stage(trainer, cfg, rounds=rounds, method=method, meta=trainer.describe(), **stage)
