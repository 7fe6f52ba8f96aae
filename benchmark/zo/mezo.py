"""MeZO's zeroth-order step (Malladi et al. 2023, Alg. 1; bernier2024 Eq. 3 and Alg. 3).

One step with seed ``s``, ``num_z`` directions and perturbation scale ε:

* direction ``z_p`` (p = 0..num_z-1) is regenerated whenever needed from a dedicated ``torch.Generator``
  seeded with :func:`direction_seed` (s, p), one ``randn`` per trainable parameter in the fixed order of
  ``named_parameters()`` (the reference ``zo_perturb_parameters``; the global RNG is never touched);
* the projected gradient of a batch B is ``g = (L(θ + εz_p; B) − L(θ − εz_p; B)) / 2ε`` with L the mean
  loss in eval mode (:func:`benchmark.zo.text_model.mean_loss`);
* the update is bernier2024 Alg. 3 l. 14-19: ``θ ← θ − lr · (Σ_p ḡ_p z_p) / num_z`` (applied direction by
  direction), with MeZO's weight decay ``θ ← θ − lr·wd·θ`` on parameters whose name contains none of
  ``bias``, ``layer_norm``, ``layernorm`` (case-sensitive, as the reference: RoBERTa's ``LayerNorm`` *does*
  get decay; the default wd is 0, as in MeZO's RoBERTa runs).

Where this departs from the reference: the reference restores θ in place (``+εz``, ``−2εz``, ``+εz``); in
floating point that is **not** exact, in fp32 or any other format (about half of the entries end one ulp
away after one step; ``docs/fedmezo.md`` has the measurement). Replicas that all perturb stay equal to one
another, but a replica that only *reconstructs* the update (a FedMeZO server, a client that missed a round)
would drift away. ``restore="copy"`` (the default) keeps one copy of the trainable parameters during the
step and copies it back, which is exact; ``restore="inplace"`` is the reference behaviour. The copy costs one
model's worth of parameters, which is still inference-class memory (no gradients, no optimiser state, no
stored activations).

Directions, ``z_stream`` (issue 26, checked against the released code by ``flb peer mezo``): ``"flb"`` (the
default) is the hashed per-direction generator above. ``"mezo"`` draws z the reference's way and does its
arithmetic in its order: a generator seeded with the step's seed itself (direction p: seed + p; the reference
has one direction), one ``torch.normal(0, 1)`` per parameter (the same numbers as ``torch.manual_seed(seed)``
then ``torch.normal`` on the global generator, which the reference uses, without touching it), the
perturbation ``θ + (f·z)·ε`` for f = 1, −2, 1 (with ``restore="inplace"``) and the update ``θ − lr·(g·z + wd·θ)``
(``θ − lr·(g·z)`` on the exempt names). The two streams give different z for the same seed, and ``add_`` with
a scalar rounds differently from the reference's expression, so only ``"mezo"`` reproduces its weights bit for
bit (``docs/peers/mezo.md``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from benchmark.errors import ConfigError
from benchmark.zo.text_model import DEFAULT_CHUNK, TextTensors, mean_loss

RESTORES = ("copy", "inplace")
Z_STREAMS = ("flb", "mezo")
#: Parameter names MeZO exempts from weight decay (substring, case-sensitive: reference trainer.py).
NO_DECAY = ("bias", "layer_norm", "layernorm")


@dataclass(frozen=True)
class ZOConfig:
    """MeZO's hyper-parameters (bernier2024 §4.2.1: ε = 1e-3 fixed, lr tuned; num_z = 2 per §4.2.1)."""

    lr: float
    eps: float = 1e-3
    num_z: int = 2
    weight_decay: float = 0.0
    restore: str = "copy"
    chunk: int = DEFAULT_CHUNK
    #: how z is drawn and applied: this suite's hashed generators, or the reference's (module docstring)
    z_stream: str = "flb"

    def __post_init__(self) -> None:
        if self.restore not in RESTORES:
            raise ConfigError(f"ZOConfig.restore {self.restore!r}", f"use one of {RESTORES}")
        if self.z_stream not in Z_STREAMS:
            raise ConfigError(f"ZOConfig.z_stream {self.z_stream!r}", f"use one of {Z_STREAMS}")
        if self.num_z < 1 or self.eps <= 0 or self.lr < 0:
            raise ConfigError(
                f"ZOConfig num_z={self.num_z}, eps={self.eps}, lr={self.lr}",
                "use num_z >= 1, eps > 0 and lr >= 0",
            )


Params = list[tuple[str, nn.Parameter]]


def trainable_parameters(model: nn.Module) -> Params:
    """The parameters MeZO perturbs, in ``named_parameters()`` order (fixed for a model class)."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def direction_seed(seed: int, p: int) -> int:
    """The generator seed of direction ``p`` in a step with seed ``seed`` (a hash, so any direction can be
    regenerated alone, and every replica derives the same one)."""
    digest = hashlib.sha256(f"flb-mezo-z {int(seed)} {int(p)}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def _directions(params: Params, seed: int, p: int, stream: str = "flb"):
    device = params[0][1].device if params else torch.device("cpu")
    gen = torch.Generator(device=device)
    if stream == "mezo":  # the reference: manual_seed(seed), then torch.normal per parameter
        gen.manual_seed(int(seed) + p)
        for name, param in params:
            yield name, param, torch.normal(0.0, 1.0, size=param.shape, generator=gen, device=param.device,
                                            dtype=param.dtype)  # fmt: skip
        return
    gen.manual_seed(direction_seed(seed, p))
    for name, param in params:
        yield name, param, torch.randn(param.shape, generator=gen, device=param.device, dtype=param.dtype)


@torch.no_grad()
def add_direction_(params: Params, seed: int, p: int, scale: float, stream: str = "flb") -> None:
    """``θ ← θ + scale · z_p`` in place (z_p regenerated from the seed)."""
    for _, param, z in _directions(params, seed, p, stream):
        param.add_(z, alpha=scale)


@torch.no_grad()
def perturb_(params: Params, seed: int, p: int, factor: int, config: ZOConfig) -> None:
    """``θ ← θ + factor·ε·z_p``: with ``add_`` (``z_stream="flb"``) or as the reference writes it,
    ``θ + factor * z * ε`` (``"mezo"``)."""
    if config.z_stream == "flb":
        add_direction_(params, seed, p, factor * config.eps)
        return
    for _, param, z in _directions(params, seed, p, "mezo"):
        param.copy_(param + factor * z * config.eps)


def _snapshot(params: Params) -> list[torch.Tensor]:
    return [param.detach().clone() for _, param in params]


@torch.no_grad()
def _copy_back(params: Params, saved: list[torch.Tensor]) -> None:
    for (_, param), value in zip(params, saved, strict=True):
        param.copy_(value)


@dataclass(frozen=True)
class Projection:
    """SPSA on some batches: ``grads[b, p] = (L(θ+εz_p; b) − L(θ−εz_p; b)) / 2ε`` and the losses
    ``plus[b, p] = L(θ+εz_p; b)`` (MeZO reports loss1 as the training loss), float64 (batches × num_z)."""

    grads: np.ndarray
    plus: np.ndarray
    #: ``minus[b, p] = L(θ−εz_p; b)`` (the second loss of the pair)
    minus: np.ndarray | None = None


def projected_gradients(
    model: nn.Module,
    batches: Sequence[TextTensors],
    seed: int,
    config: ZOConfig,
    params: Params | None = None,
) -> Projection:
    """SPSA projected gradients of every batch at the same θ (one perturbation per direction, all batches
    evaluated under it). θ is left as it was (bit for bit with ``restore="copy"``)."""
    params = trainable_parameters(model) if params is None else params
    out = np.zeros((len(batches), config.num_z), dtype=np.float64)
    losses = np.zeros_like(out)
    saved = _snapshot(params) if config.restore == "copy" else None
    minus_losses = np.zeros_like(out)
    for p in range(config.num_z):
        perturb_(params, seed, p, 1, config)
        plus = [mean_loss(model, b, config.chunk) for b in batches]
        if saved is not None:
            _copy_back(params, saved)
            perturb_(params, seed, p, -1, config)
        else:
            perturb_(params, seed, p, -2, config)
        minus = [mean_loss(model, b, config.chunk) for b in batches]
        if saved is not None:
            _copy_back(params, saved)
        else:
            perturb_(params, seed, p, 1, config)
        out[:, p] = (np.asarray(plus) - np.asarray(minus)) / (2.0 * config.eps)
        losses[:, p] = plus
        minus_losses[:, p] = minus
    return Projection(out, losses, minus_losses)


def weighted_average(values: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """``Σ_b w_b values[b] / Σ_b w_b`` row by row in a fixed order (float64): the server's aggregation and
    the centralised gradient accumulation use this one function, so they round alike."""
    w = np.asarray(weights, dtype=np.float64)
    if values.shape[0] != w.shape[0] or w.sum() <= 0:
        raise ConfigError(
            f"{values.shape[0]} projected-gradient rows, {w.shape[0]} weights summing to {w.sum()}",
            "give one positive weight per client",
        )
    total = np.zeros(values.shape[1], dtype=np.float64)
    for row, weight in zip(values, w, strict=True):
        total = total + weight * row
    return total / w.sum()


@torch.no_grad()
def apply_update_(params: Params, seed: int, projected: Sequence[float], config: ZOConfig) -> None:
    """bernier2024 Alg. 3 l. 12-19 (+ MeZO's weight decay): ``θ ← θ − lr·wd·θ − lr·Σ_p g_p z_p / num_z``."""
    if len(projected) != config.num_z:
        raise ConfigError(f"{len(projected)} projected gradients", f"send num_z = {config.num_z} scalars")
    if config.z_stream == "mezo":
        _mezo_update_(params, seed, projected, config)
        return
    if config.weight_decay:
        for name, param in params:
            if not any(key in name for key in NO_DECAY):
                param.add_(param, alpha=-config.lr * config.weight_decay)
    for p, g in enumerate(projected):
        add_direction_(params, seed, p, -config.lr * float(g) / config.num_z)


def _mezo_update_(params: Params, seed: int, projected: Sequence[float], config: ZOConfig) -> None:
    """The reference's update in its order, direction by direction (g_p / num_z; num_z = 1 is the reference):
    ``θ − lr·(g·z + wd·θ)``, and ``θ − lr·(g·z)`` on the names :data:`NO_DECAY` exempts."""
    for p, g in enumerate(projected):
        g = float(g) / config.num_z if config.num_z > 1 else float(g)
        for name, param, z in _directions(params, seed, p, "mezo"):
            if any(key in name for key in NO_DECAY):
                param.copy_(param - config.lr * (g * z))
            else:
                param.copy_(param - config.lr * (g * z + config.weight_decay * param))


def mezo_step(
    model: nn.Module,
    batches: Sequence[TextTensors],
    seed: int,
    config: ZOConfig,
    weights: Sequence[float] | None = None,
) -> np.ndarray:
    """One centralised MeZO step with gradient accumulation over ``batches`` (weighted by ``weights``,
    default the batch sizes): returns the accumulated projected gradients (num_z,)."""
    params = trainable_parameters(model)
    grads = projected_gradients(model, batches, seed, config, params).grads
    avg = weighted_average(grads, [len(b) for b in batches] if weights is None else weights)
    apply_update_(params, seed, avg, config)
    return avg


def parameters_sha256(model: nn.Module) -> str:
    """sha256 of every parameter's bytes in ``named_parameters()`` order (replica equality, bit for bit)."""
    h = hashlib.sha256()
    for name, param in model.named_parameters():
        h.update(name.encode())
        h.update(param.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()
