"""Server side of a round: the weighted average of client deltas and the server optimiser step.

FedOpt view (Reddi et al. 2021, Algorithm 1): the server treats ``g = x_global - avg_k(x_k)`` (the
example-weighted average of the clients' deltas, FLSim's ``WEIGHTED_AVERAGE``) as a pseudo-gradient and takes
one optimiser step on it. The sign convention is FLSim's: the delta is ``global - local``, written into
``.grad`` and followed by ``optimizer.step()`` (papers-code.md §1.5), so

* FedAvg  = SGD(lr=1, momentum=0): ``x <- x - g = avg_k(x_k)``;
* FedAvgM = SGD(lr, momentum) with PyTorch's momentum rule (first step ``buf = g``);
* FedAdam = ``torch.optim.Adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-5)`` as in the legate2023
  reference code (coupled L2, bias correction), or, with ``tau``, Reddi et al.'s Algorithm 2 (no bias
  correction, ``x <- x - lr * m / (sqrt(v) + tau)``).

The optimisers act on a ``name -> tensor`` mapping in place and keep their state by name; they step exactly
the tensors they are given, which is how the engine keeps a frozen body untouched (or, on request,
reproduces the reference's drift of frozen weights under FedAdam weight decay). ``state_dict()`` /
``load_state_dict()`` save and restore that state (FedAvgM's momentum buffers, FedAdam's m, v and step
count) for checkpoints (:mod:`benchmark.federated.checkpoint`); the hyper-parameters come from the config.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from benchmark.errors import ConfigError
from benchmark.registry import Registry

if TYPE_CHECKING:
    import torch

# torch is imported when a server steps, not on import: FLConfig checks a run's ``server_opt`` against this
# registry, and a workflow plans runs without importing torch (tests/test_backbones.py checks the planning imports).

Tensors = Mapping[str, "torch.Tensor"]


def _no_grad(step: Callable[..., None]) -> Callable[..., None]:
    """``torch.no_grad()`` around a server step, torch imported at the call."""

    @functools.wraps(step)
    def stepped(*args: Any, **kwargs: Any) -> None:
        import torch

        with torch.no_grad():
            step(*args, **kwargs)

    return stepped


class DeltaAccumulator:
    """Running weighted sum of client deltas (memory: one copy of the aggregated tensors).

    ``add(delta, w)`` for each client, then :meth:`average` returns ``sum_k w_k delta_k / sum_k w_k``
    (FLSim ``WEIGHTED_AVERAGE`` with ``w_k`` = examples processed, or 1 for an unweighted mean).
    """

    def __init__(self) -> None:
        self._sum: dict[str, torch.Tensor] = {}
        self.total_weight = 0.0

    def add(self, delta: Tensors, weight: float) -> None:
        """Accumulate ``weight * delta`` for every tensor of ``delta``."""
        if not weight > 0:
            raise ConfigError(f"client weight must be > 0, got {weight}", "give every sampled client data")
        for name, value in delta.items():
            if name in self._sum:
                self._sum[name].add_(value, alpha=weight)
            else:
                self._sum[name] = value.detach().clone().mul_(weight)
        self.total_weight += float(weight)

    def average(self) -> dict[str, torch.Tensor]:
        """``sum_k w_k delta_k / sum_k w_k``."""
        if self.total_weight <= 0:
            raise ConfigError("no client update was aggregated this round", "sample at least one client")
        return {name: value / self.total_weight for name, value in self._sum.items()}


class ServerOptimizer:
    """Base class: ``step(params, pseudo_grad)`` updates ``params`` in place."""

    name = "base"

    def step(self, params: Tensors, pseudo_grad: Tensors) -> None:
        """Apply one server step to every tensor of ``params`` using ``pseudo_grad[name]``."""
        raise NotImplementedError

    def describe(self) -> dict[str, object]:
        """Hyper-parameters, for the run record."""
        return {"name": self.name}

    def state_dict(self) -> dict[str, object]:
        """The optimiser's state (tensors by parameter name; references, not copies)."""
        return {"name": self.name}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore :meth:`state_dict` (tensors are copied; move them to the parameters' device first)."""
        self._check_name(state)

    def _check_name(self, state: Mapping[str, object]) -> None:
        if state.get("name") != self.name:
            raise ConfigError(
                f"server optimiser state is for {state.get('name')!r}, this run uses {self.name!r}",
                "resume with the server_opt the state was saved with",
            )


class FedAvg(ServerOptimizer):
    """SGD on the pseudo-gradient, no momentum: ``x <- x - lr * g`` (McMahan et al. 2017 with lr = 1)."""

    name = "fedavg"

    def __init__(self, lr: float = 1.0) -> None:
        self.lr = float(lr)

    @_no_grad
    def step(self, params: Tensors, pseudo_grad: Tensors) -> None:
        """``x <- x - lr * g`` per tensor."""
        for name, p in params.items():
            p.sub_(pseudo_grad[name], alpha=self.lr)

    def describe(self) -> dict[str, object]:
        """Hyper-parameters, for the run record."""
        return {"name": self.name, "lr": self.lr}


class FedAvgM(ServerOptimizer):
    """Server SGD with momentum (Hsu et al. 2019): ``buf <- mu * buf + g`` (``buf = g`` at the first step),
    ``x <- x - lr * buf``, i.e. ``torch.optim.SGD(lr, momentum)`` with dampening 0 as FLSim uses it."""

    name = "fedavgm"

    def __init__(self, lr: float, momentum: float = 0.9) -> None:
        self.lr = float(lr)
        self.momentum = float(momentum)
        self.buf: dict[str, torch.Tensor] = {}

    @_no_grad
    def step(self, params: Tensors, pseudo_grad: Tensors) -> None:
        """One momentum-SGD step per tensor."""
        for name, p in params.items():
            g = pseudo_grad[name]
            if name not in self.buf:
                self.buf[name] = g.detach().clone()
            else:
                self.buf[name].mul_(self.momentum).add_(g)
            p.sub_(self.buf[name], alpha=self.lr)

    def describe(self) -> dict[str, object]:
        """Hyper-parameters, for the run record."""
        return {"name": self.name, "lr": self.lr, "momentum": self.momentum}

    def state_dict(self) -> dict[str, object]:
        """Momentum buffers by parameter name."""
        return {"name": self.name, "buf": dict(self.buf)}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore the momentum buffers (copied)."""
        self._check_name(state)
        self.buf = {k: v.detach().clone() for k, v in state["buf"].items()}  # type: ignore[attr-defined]


class FedAdam(ServerOptimizer):
    """Adam on the pseudo-gradient.

    Default (``tau=None``): exactly ``torch.optim.Adam(lr, betas, eps, weight_decay)`` (single-tensor path) as
    the legate2023 reference runs it: ``g <- g + wd * x`` (coupled L2), ``m <- lerp(m, g, 1 - b1)``,
    ``v <- b2 v + (1 - b2) g^2``, ``x <- x - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``.
    Because of the coupled L2 a parameter whose pseudo-gradient is 0 still moves (papers-code.md §1.7-2).

    With ``tau``: Reddi et al. 2021 Algorithm 2 (FedAdam): no bias correction,
    ``x <- x - lr * m / (sqrt(v) + tau)``; ``weight_decay`` is still added to ``g`` if non-zero.
    """

    name = "fedadam"

    def __init__(
        self,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-5,
        tau: float | None = None,
    ) -> None:
        self.lr = float(lr)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.tau = None if tau is None else float(tau)
        self.t = 0
        self.m: dict[str, torch.Tensor] = {}
        self.v: dict[str, torch.Tensor] = {}

    @_no_grad
    def step(self, params: Tensors, pseudo_grad: Tensors) -> None:
        """One Adam step per tensor (one shared step counter, as for a single torch param group)."""
        import torch

        self.t += 1
        for name, p in params.items():
            g = pseudo_grad[name]
            if self.weight_decay != 0.0:
                g = g.add(p, alpha=self.weight_decay)
            if name not in self.m:
                self.m[name] = torch.zeros_like(p)
                self.v[name] = torch.zeros_like(p)
            m, v = self.m[name], self.v[name]
            if self.tau is None:
                m.lerp_(g, 1.0 - self.beta1)
                v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
                step_size = self.lr / (1.0 - self.beta1**self.t)
                denom = (v.sqrt() / math.sqrt(1.0 - self.beta2**self.t)).add_(self.eps)
                p.addcdiv_(m, denom, value=-step_size)
            else:
                m.mul_(self.beta1).add_(g, alpha=1.0 - self.beta1)
                v.mul_(self.beta2).addcmul_(g, g, value=1.0 - self.beta2)
                p.addcdiv_(m, v.sqrt().add_(self.tau), value=-self.lr)

    def describe(self) -> dict[str, object]:
        """Hyper-parameters, for the run record."""
        return {
            "name": self.name,
            "lr": self.lr,
            "betas": [self.beta1, self.beta2],
            "eps": self.eps,
            "weight_decay": self.weight_decay,
            "tau": self.tau,
            "variant": "torch_adam" if self.tau is None else "reddi2021_alg2",
        }

    def state_dict(self) -> dict[str, object]:
        """Step count and first / second moments by parameter name."""
        return {"name": self.name, "t": self.t, "m": dict(self.m), "v": dict(self.v)}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        """Restore step count and moments (copied)."""
        self._check_name(state)
        self.t = int(state["t"])  # type: ignore[call-overload]
        self.m = {k: v.detach().clone() for k, v in state["m"].items()}  # type: ignore[attr-defined]
        self.v = {k: v.detach().clone() for k, v in state["v"].items()}  # type: ignore[attr-defined]


#: Server optimisers by name: a factory from a run config (any object with the ``server_*`` fields of
#: :class:`benchmark.fl.config.FLConfig`) to a :class:`ServerOptimizer`. Add one with
#: :func:`register_server_optimizer` (docs/extending.md).
SERVER_OPTIMIZERS: Registry[Callable[[Any], ServerOptimizer]] = Registry("server optimiser")


def register_server_optimizer(
    name: str,
) -> Callable[[Callable[[Any], ServerOptimizer]], Callable[[Any], ServerOptimizer]]:
    """Decorator: register ``factory(cfg) -> ServerOptimizer`` under ``name`` (a second one is an error)."""
    return SERVER_OPTIMIZERS.register(name, lambda factory: factory)


@register_server_optimizer("fedavg")
def _fedavg(cfg: Any) -> ServerOptimizer:
    return FedAvg(cfg.server_lr)


@register_server_optimizer("fedavgm")
def _fedavgm(cfg: Any) -> ServerOptimizer:
    return FedAvgM(cfg.server_lr, cfg.server_momentum)


@register_server_optimizer("fedadam")
def _fedadam(cfg: Any) -> ServerOptimizer:
    return FedAdam(
        cfg.server_lr,
        betas=cfg.server_adam_betas,
        eps=cfg.server_adam_eps,
        weight_decay=cfg.server_weight_decay,
        tau=cfg.server_adam_tau,
    )


def make_server_optimizer(cfg: Any) -> ServerOptimizer:
    """The server optimiser registered as ``cfg.server_opt``, with the config's hyper-parameters (module
    docstring); an unknown name is one :class:`~benchmark.errors.UnknownNameError` listing the registered ones."""
    return SERVER_OPTIMIZERS.get(cfg.server_opt)(cfg)
