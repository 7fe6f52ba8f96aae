"""SLoRA (Babakniya et al. 2023), the first-order baseline that bernier2024 compares FedMeZO with.

bernier2024 §4.2.1 (Table 4.1, Eq. 7) runs SLoRA with 50 global rounds, 10 clients, full participation,
1 local step per round, LoRA rank 16, and a sparse "priming" stage (step 1) at density 10% for 20% of
the rounds. This module runs the same two stages on :class:`benchmark.zo.text_model.TextClassifier`:

**Stage 1 (priming, rounds ``0 .. R1-1``, ``R1 = round(priming_fraction · rounds)``, halves up).** Sparse
full fine-tuning under FedAvg. One random mask over *all* encoder parameters, with exactly
``round(density · N)`` ones among the ``N`` encoder entries, is drawn once from the seed (stream
``"slora_mask"`` of :mod:`benchmark.seeding`); every client regenerates the same mask from the seed, so no
indices travel. A client trains only the masked entries (every unmasked entry is put back to its
pre-trained value after each step: for SGD and AdamW the same as masking the gradient, and it also undoes
weight decay there) and sends the **values** of the masked entries; the server averages them weighted by
client size and broadcasts the result. The linear head is new (not pre-trained) and is trained densely
in both stages and exchanged in full every round (our choice: SLoRA fine-tunes HF's sequence-classification
heads, and how its mask treats the head is not stated in what we could read).

**Switch.** For every module that gets LoRA, ``ΔW = W_after_stage1 − W_pretrained`` is decomposed by SVD
(float64) and LoRA starts from its best rank-``r`` approximation: ``B = U_r √S_r / √s``,
``A = √S_r V_rᵀ / √s`` with ``s = alpha / r`` peft's scaling, so that ``s · B A = U_r S_r V_rᵀ`` (the
balanced split is our choice). All encoder weights go back to their pre-trained values (so every other
stage-1 update is dropped); the head keeps its stage-1 value. This follows the SLoRA abstract's
"data-driven initialization" and summaries of it ("sparse fine-tune warm-up, then SVD-decompose to
initialize LoRA"); the paper's method section was not available to us, so the reset and the split are
documented choices, not verified against the authors' code.

**Stage 2 (rounds ``R1 .. R-1``).** LoRA from ``peft`` (:func:`peft.inject_adapter_in_model`) on
``target_modules`` (default the attention ``query`` and ``value`` of BERT/MiniLM/RoBERTa), rank ``r``,
``lora_alpha = alpha`` (default ``r``, so the scaling is 1), dropout 0, no bias; the encoder base is
frozen. Clients train the LoRA matrices and the head; the server averages A and B separately (FedAvg of
the factors, the common federated-LoRA rule; SLoRA's own rule was not available to us), weighted by
client size.

**Local training.** ``local_steps`` minibatch steps of ``batch_size`` examples (clamped to the client's
size; a step with ``batch_size ≥ n`` uses the whole client) drawn without replacement from permutations of
a ``torch.Generator`` keyed by ``(seed, round, client)`` (stream ``"data_order"``). The optimiser
(``"sgd"``: plain SGD, no momentum; ``"adamw"``: :class:`torch.optim.AdamW`) is created fresh for every
client and round: clients are stateless and optimiser state is never communicated (with one local step,
AdamW's first bias-corrected step is close to ``lr · sign(g)``). The optimiser is a required setting, as
the SLoRA paper's choice was not available to us. The model runs in **eval mode** (dropout off) as MeZO
does (``text_model``), so a run is deterministic and one client with SGD equals centralised SGD exactly.

**Communication is measured.** Every message goes through a :class:`Transport`, which counts its payload
bytes (``numel × element_size`` of the tensors sent; framing and indices are not counted, and none are
needed) and hands the receiver a copy. Each round the server sends the current trainable state to every
participating client (downlink; round 0 included, the initial model sharing is not) and each client sends
its trained state back (uplink), so downlink equals uplink. :func:`slora_comm_arithmetic` is Eq. 7 of
bernier2024 for the same settings (uplink, fp32), extended by the head exchanged every round; a run's
measured uplink equals it exactly. Clients without examples take no part (no messages; ``K`` counts the
others).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from benchmark.errors import ConfigError
from benchmark.seeding import check_seed, torch_generator
from benchmark.zo.text_model import TextClassifier, TextTensors, accuracy

OPTIMIZERS = ("sgd", "adamw")
MASK_STREAM = "slora_mask"
ORDER_STREAM = "data_order"


@dataclass(frozen=True, kw_only=True)
class SLoRAConfig:
    """A SLoRA run (bernier2024 §4.2.1 defaults: 50 rounds, 20% priming at density 0.1, rank 16)."""

    rounds: int = 50
    priming_fraction: float = 0.2
    density: float = 0.1
    rank: int = 16
    alpha: float | None = None  # peft lora_alpha; None = rank (scaling 1)
    target_modules: tuple[str, ...] = ("query", "value")
    lr: float
    local_steps: int = 1
    batch_size: int
    optimizer: str
    weight_decay: float = 0.0
    seed: int = 0
    eval_every: int

    def __post_init__(self) -> None:
        def need(ok: bool, what: str, fix: str) -> None:
            if not ok:
                raise ConfigError(f"SLoRAConfig.{what}", fix)

        need(_is_int(self.rounds) and self.rounds >= 1, f"rounds={self.rounds!r}", "use at least 1 round")
        need(
            0.0 <= self.priming_fraction <= 1.0,
            f"priming_fraction={self.priming_fraction!r}",
            "give the share of rounds in stage 1, in [0, 1] (the thesis uses 0.2)",
        )
        need(
            self.priming_rounds >= 1,
            f"priming_fraction={self.priming_fraction} gives 0 stage-1 rounds of {self.rounds}",
            "raise priming_fraction or rounds: SLoRA initialises LoRA from the stage-1 update",
        )
        need(0.0 < self.density <= 1.0, f"density={self.density!r}", "use a density in (0, 1], e.g. 0.1")
        need(
            _is_int(self.rank) and self.rank >= 1, f"rank={self.rank!r}", "use a positive LoRA rank, e.g. 16"
        )
        need(
            self.alpha is None or self.alpha > 0,
            f"alpha={self.alpha!r}",
            "use a positive lora_alpha, or None for alpha = rank",
        )
        need(
            isinstance(self.target_modules, tuple)
            and len(self.target_modules) > 0
            and all(isinstance(t, str) and t for t in self.target_modules),
            f"target_modules={self.target_modules!r}",
            "give a non-empty tuple of module names, e.g. ('query', 'value')",
        )
        need(self.lr > 0, f"lr={self.lr!r}", "use a positive learning rate")
        need(
            _is_int(self.local_steps) and self.local_steps >= 1,
            f"local_steps={self.local_steps!r}",
            "use at least 1 local step (the thesis uses 1)",
        )
        need(
            _is_int(self.batch_size) and self.batch_size >= 1,
            f"batch_size={self.batch_size!r}",
            "use a positive batch size",
        )
        need(self.optimizer in OPTIMIZERS, f"optimizer={self.optimizer!r}", f"use one of {OPTIMIZERS}")
        need(self.weight_decay >= 0, f"weight_decay={self.weight_decay!r}", "use a non-negative weight decay")
        check_seed(self.seed, "SLoRAConfig.seed")
        need(
            _is_int(self.eval_every) and self.eval_every >= 1,
            f"eval_every={self.eval_every!r}",
            "evaluate every k >= 1 rounds (the last round is always evaluated)",
        )

    @property
    def priming_rounds(self) -> int:
        """``R1 = round(priming_fraction · rounds)``, halves rounded up (50 rounds × 0.2 → 10)."""
        return priming_rounds(self.rounds, self.priming_fraction)

    @property
    def lora_alpha(self) -> float:
        return float(self.rank if self.alpha is None else self.alpha)

    @property
    def scaling(self) -> float:
        """peft's LoRA scaling ``alpha / r``."""
        return self.lora_alpha / self.rank


@dataclass
class SLoRARound:
    """One round: its stage (1 = sparse priming, 2 = LoRA), the clients' mean training loss (weighted by
    client size), the test accuracy in percent when evaluated, and the payload bytes of the round."""

    round: int
    stage: int
    train_loss: float
    test_accuracy: float | None
    uplink_bytes: int
    downlink_bytes: int


@dataclass
class SLoRAResult:
    """A run: per-round history, final accuracy (%), total measured bytes, Eq. 7's bytes for the same
    settings (uplink), and the number of parameters trained and exchanged in stage 2 (LoRA + head)."""

    history: list[SLoRARound]
    final_accuracy: float
    uplink_bytes: int
    downlink_bytes: int
    arithmetic_bytes: int
    trainable_params_stage2: int


@dataclass(frozen=True)
class SLoRAEvent:
    """What ``progress`` receives: ``kind`` is ``"round"`` (after a round's aggregation; ``model`` holds the
    global model) or ``"switch"`` (LoRA just initialised from ΔW, before stage 2 trains; ``record`` None).
    ``model`` is the live working model: copy what you keep."""

    kind: str
    round: int
    model: TextClassifier
    record: SLoRARound | None


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def priming_rounds(rounds: int, priming_fraction: float) -> int:
    """Stage-1 rounds: ``round(priming_fraction · rounds)`` with halves rounded up."""
    return min(rounds, math.floor(priming_fraction * rounds + 0.5))


def masked_count(n: int, density: float) -> int:
    """Entries in a density-``density`` mask over ``n`` entries: ``round(density · n)``, halves up."""
    return min(n, math.floor(density * n + 0.5))


# ------------------------------------------------------------------------------------ communication


def payload_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Payload of a message: ``Σ numel × element_size`` of its tensors."""
    return sum(t.numel() * t.element_size() for t in tensors)


class Transport:
    """Carries messages between the server and the clients and counts their payload bytes.

    :meth:`up` (client → server) and :meth:`down` (server → client) return detached copies, so a receiver
    only ever sees what was sent."""

    def __init__(self) -> None:
        self.uplink_bytes = 0
        self.downlink_bytes = 0

    def up(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        self.uplink_bytes += payload_bytes(tensors)
        return [t.detach().clone() for t in tensors]

    def down(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        self.downlink_bytes += payload_bytes(tensors)
        return [t.detach().clone() for t in tensors]


def slora_comm_arithmetic(
    *,
    rounds: int,
    priming_fraction: float,
    clients: int,
    density: float,
    model_params: int,
    lora_params: int,
    head_params: int = 0,
    bytes_per_value: int = 4,
) -> int:
    """bernier2024 Eq. 7 in bytes: ``R1 · K · density · model_size + R2 · K · LoRA_size`` (``R1`` stage-1
    rounds, ``R2 = R − R1``, ``K`` clients, fp32), one direction (the clients' uploads).

    ``density · model_size`` is ``round(density · model_params)`` values (the mask has exactly that many
    entries; its indices are not sent, every client regenerates the mask from the seed). ``head_params``
    extends Eq. 7 by a dense head exchanged in both stages (0 gives Eq. 7 as printed).

    With the thesis' setting (RoBERTa-large, 355,359,744 parameters; rank-16 LoRA on query and value of 24
    layers of width 1024, 1,572,864 parameters; R = 50, 20% priming at density 0.1, K = 10) this gives
    16.73 GB, not the 69.254 GB of Table 4.1; the thesis does not say how its figure was obtained."""
    r1 = priming_rounds(rounds, priming_fraction)
    r2 = rounds - r1
    stage1 = r1 * clients * (masked_count(model_params, density) + head_params)
    stage2 = r2 * clients * (lora_params + head_params)
    return (stage1 + stage2) * bytes_per_value


# ----------------------------------------------------------------------------------------- helpers


def random_masks(
    params: Sequence[tuple[str, torch.Tensor]], density: float, seed: int
) -> dict[str, torch.Tensor]:
    """The stage-1 mask: exactly ``round(density · N)`` of the ``N`` entries of ``params`` (taken together,
    in order), chosen uniformly by ``torch.randperm`` from the seed's ``"slora_mask"`` stream. A pure
    function of ``(shapes, density, seed)``, so every client rebuilds the same mask."""
    sizes = [p.numel() for _, p in params]
    total = sum(sizes)
    gen = torch_generator(seed, MASK_STREAM)
    flat = torch.zeros(total, dtype=torch.bool)
    flat[torch.randperm(total, generator=gen)[: masked_count(total, density)]] = True
    parts = torch.split(flat, sizes)
    return {name: part.view_as(p).to(p.device) for (name, p), part in zip(params, parts, strict=True)}


def batch_indices(n: int, batch_size: int, steps: int, generator: torch.Generator) -> list[torch.Tensor]:
    """``steps`` minibatches of ``min(batch_size, n)`` indices of ``range(n)``: consecutive slices of
    permutations drawn from ``generator`` (a new permutation when one is used up; batches never straddle
    two permutations)."""
    b = min(batch_size, n)
    per_perm = n // b
    out: list[torch.Tensor] = []
    perm = torch.empty(0, dtype=torch.long)
    for s in range(steps):
        j = s % per_perm
        if j == 0:
            perm = torch.randperm(n, generator=generator)
        out.append(perm[j * b : (j + 1) * b])
    return out


def client_generator(seed: int, round_: int, client: int) -> torch.Generator:
    """The batch-order generator of ``client`` in ``round_`` (stream ``"data_order"``)."""
    return torch_generator(seed, ORDER_STREAM, round_, client)


def make_optimizer(params: list[nn.Parameter], config: SLoRAConfig) -> torch.optim.Optimizer:
    if config.optimizer == "sgd":
        return torch.optim.SGD(params, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)


def local_train(
    model: TextClassifier,
    params: list[nn.Parameter],
    data: TextTensors,
    config: SLoRAConfig,
    generator: torch.Generator,
    masks: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> float:
    """``config.local_steps`` steps of a fresh optimiser on ``params`` (eval mode, mean cross-entropy per
    minibatch); returns the mean minibatch loss. ``masks`` (stage 1) pairs the first ``len(masks)``
    parameters (the encoder's) with their mask and pre-trained value: every unmasked entry is restored after
    each step, which for these element-wise optimisers is the same as masking the gradient, and also undoes
    weight decay there. Parameters past ``masks`` (the head) train densely."""
    model.eval()
    opt = make_optimizer(params, config)
    losses = []
    for idx in batch_indices(len(data), config.batch_size, config.local_steps, generator):
        batch = data.subset(idx.to(data.labels.device))
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(batch.input_ids, batch.attention_mask).float(), batch.labels)
        loss.backward()
        opt.step()
        if masks is not None:
            with torch.no_grad():
                for p, (m, pre) in zip(params, masks, strict=False):
                    p.copy_(torch.where(m, p, pre))
        losses.append(float(loss.detach()))
    opt.zero_grad(set_to_none=True)
    return sum(losses) / len(losses)


def _average(messages: Sequence[Sequence[torch.Tensor]], weights: Sequence[float]) -> list[torch.Tensor]:
    """Weighted mean of the clients' messages, position by position (float64 sums, cast back)."""
    out = []
    for j in range(len(messages[0])):
        acc = torch.zeros(messages[0][j].shape, dtype=torch.float64, device=messages[0][j].device)
        for msg, w in zip(messages, weights, strict=True):
            acc += msg[j].double() * w
        out.append(acc.to(messages[0][j].dtype))
    return out


def lora_factors(delta: torch.Tensor, rank: int, scaling: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """LoRA ``(A, B)`` (``r × in``, ``out × r``) with ``scaling · B A`` the best rank-``r`` approximation of
    ``delta`` (``out × in``): truncated SVD in float64, the singular values split evenly between B and A."""
    if rank > min(delta.shape):
        raise ConfigError(
            f"LoRA rank {rank} exceeds a target matrix of shape {tuple(delta.shape)}",
            "lower SLoRAConfig.rank or choose larger target_modules",
        )
    u, s, vh = torch.linalg.svd(delta.double(), full_matrices=False)
    root = (s[:rank] / scaling).sqrt()
    b = u[:, :rank] * root
    a = root[:, None] * vh[:rank]
    return a.to(delta.dtype), b.to(delta.dtype)


def lora_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The peft LoRA layers of ``model`` (name, module), in module order."""
    from peft.tuners.lora import LoraLayer  # local: heavy import (peft)

    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLayer)]


def switch_to_lora(
    model: TextClassifier, pretrained: dict[str, torch.Tensor], config: SLoRAConfig
) -> list[nn.Parameter]:
    """SLoRA's switch, in place: the encoder's current weights hold the stage-1 result; LoRA (peft) is
    injected on ``config.target_modules`` with ``(A, B)`` from the SVD of ``ΔW = W − pretrained`` of each
    target, every encoder weight goes back to ``pretrained`` and is frozen. Returns the stage-2 trainable
    parameters (LoRA A, B per target, then the head)."""
    from peft import LoraConfig, inject_adapter_in_model  # local: heavy import (peft)

    stage1 = {n: p.detach().clone() for n, p in model.encoder.named_parameters()}
    lora_cfg = LoraConfig(
        r=config.rank,
        lora_alpha=config.lora_alpha,
        target_modules=list(config.target_modules),
        lora_dropout=0.0,
        bias="none",
    )
    with torch.random.fork_rng(devices=[]):  # peft's random A init must not move the caller's RNG
        try:
            inject_adapter_in_model(lora_cfg, model.encoder)
        except ValueError as err:
            raise ConfigError(
                f"SLoRAConfig.target_modules={config.target_modules!r}: {err}",
                "name Linear modules of the encoder (BERT/MiniLM/RoBERTa: 'query', 'value')",
            ) from err
    targets = lora_modules(model.encoder)
    trainable: list[nn.Parameter] = []
    with torch.no_grad():
        for name, p in model.encoder.named_parameters():
            p.requires_grad_(False)
            if "lora_" not in name:
                p.copy_(pretrained[name.replace(".base_layer.", ".")])
        for name, mod in targets:
            key = f"{name}.weight"
            a, b = lora_factors(stage1[key] - pretrained[key], config.rank, config.scaling)
            mod.lora_A["default"].weight.copy_(a)
            mod.lora_B["default"].weight.copy_(b)
            for p in (mod.lora_A["default"].weight, mod.lora_B["default"].weight):
                p.requires_grad_(True)
                trainable.append(p)
    for p in model.head.parameters():
        p.requires_grad_(True)
        trainable.append(p)
    return trainable


# -------------------------------------------------------------------------------------------- run


def run_slora(
    model: TextClassifier,
    clients: Sequence[TextTensors],
    test: TextTensors,
    config: SLoRAConfig,
    *,
    progress: Callable[[SLoRAEvent], None] | None = None,
) -> SLoRAResult:
    """Run SLoRA (module docstring) on a copy of ``model`` (the caller's model is left as it is) with full
    participation of the non-empty ``clients``; returns the history and the measured and Eq. 7 bytes."""
    if not isinstance(model, TextClassifier):
        raise ConfigError(f"run_slora model is {type(model).__name__}", "pass a benchmark.zo TextClassifier")
    active = [(k, d) for k, d in enumerate(clients) if len(d) > 0]
    if not active:
        raise ConfigError("run_slora: every client is empty", "give at least one client some examples")
    if len(test) == 0:
        raise ConfigError("run_slora: the test set is empty", "pass the examples to evaluate on")
    model = copy.deepcopy(model)
    device = next(model.parameters()).device
    active = [(k, d.to(device)) for k, d in active]
    test = test.to(device)
    total = sum(len(d) for _, d in active)
    weights = [len(d) / total for _, d in active]
    transport = Transport()
    history: list[SLoRARound] = []
    r1 = config.priming_rounds

    enc_named = list(model.encoder.named_parameters())
    enc_params = [p for _, p in enc_named]
    head_params = list(model.head.parameters())
    pretrained = {n: p.detach().clone() for n, p in enc_named}
    masks_by_name = random_masks(enc_named, config.density, config.seed)
    masks = [(masks_by_name[n], pretrained[n]) for n, _ in enc_named]
    for p in model.parameters():
        p.requires_grad_(True)

    # Stage-1 state: the values of the masked entries, then the head.
    def stage1_state() -> list[torch.Tensor]:
        return [p.detach()[m] for p, (m, _) in zip(enc_params, masks, strict=True)] + [
            p.detach() for p in head_params
        ]

    def stage1_load(state: Sequence[torch.Tensor]) -> None:
        with torch.no_grad():
            for p, (m, pre), v in zip(enc_params, masks, state, strict=False):
                p.copy_(pre)
                p[m] = v
            for p, v in zip(head_params, state[len(enc_params) :], strict=True):
                p.copy_(v)

    def plain_load(params: Sequence[nn.Parameter], state: Sequence[torch.Tensor]) -> None:
        with torch.no_grad():
            for p, v in zip(params, state, strict=True):
                p.copy_(v)

    global_state = stage1_state()
    trainable: list[nn.Parameter] = enc_params + head_params
    trainable_stage2 = 0

    def record(r: int, stage: int, loss: float, up0: int, down0: int) -> SLoRARound:
        evaluate = (r + 1) % config.eval_every == 0 or r == config.rounds - 1
        rec = SLoRARound(
            round=r,
            stage=stage,
            train_loss=loss,
            test_accuracy=accuracy(model, test) if evaluate else None,
            uplink_bytes=transport.uplink_bytes - up0,
            downlink_bytes=transport.downlink_bytes - down0,
        )
        history.append(rec)
        if progress is not None:
            progress(SLoRAEvent("round", r, model, rec))
        return rec

    for r in range(config.rounds):
        stage = 1 if r < r1 else 2
        if r == r1:
            stage1_load(global_state)
            trainable = switch_to_lora(model, pretrained, config)
            trainable_stage2 = sum(p.numel() for p in trainable)
            global_state = [p.detach().clone() for p in trainable]
            if progress is not None:
                progress(SLoRAEvent("switch", r, model, None))
        up0, down0 = transport.uplink_bytes, transport.downlink_bytes
        messages, losses = [], []
        for k, data in active:
            received = transport.down(global_state)
            if stage == 1:
                stage1_load(received)
                loss = local_train(model, trainable, data, config, client_generator(config.seed, r, k), masks)
                messages.append(transport.up(stage1_state()))
            else:
                plain_load(trainable, received)
                loss = local_train(model, trainable, data, config, client_generator(config.seed, r, k))
                messages.append(transport.up([p.detach() for p in trainable]))
            losses.append(loss)
        global_state = _average(messages, weights)
        if stage == 1:
            stage1_load(global_state)
        else:
            plain_load(trainable, global_state)
        record(r, stage, sum(w * x for w, x in zip(weights, losses, strict=True)), up0, down0)

    lora_params = trainable_stage2 - sum(p.numel() for p in head_params)
    arithmetic = slora_comm_arithmetic(
        rounds=config.rounds,
        priming_fraction=config.priming_fraction,
        clients=len(active),
        density=config.density,
        model_params=sum(p.numel() for p in enc_params),
        lora_params=max(lora_params, 0),
        head_params=sum(p.numel() for p in head_params),
        bytes_per_value=enc_params[0].element_size(),
    )
    final = history[-1].test_accuracy
    assert final is not None  # the last round is always evaluated
    return SLoRAResult(
        history=history,
        final_accuracy=final,
        uplink_bytes=transport.uplink_bytes,
        downlink_bytes=transport.downlink_bytes,
        arithmetic_bytes=arithmetic,
        trainable_params_stage2=trainable_stage2,
    )
