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

**Checkpoints.** The rounds run through the one round loop, whose checkpoint holds the trainer's global state
(stage 1's message, or LoRA's factors and the head once LoRA is in place): a killed run resumes from it
bit-identically (issue 25); the masks, the pre-trained weights and every batch order follow from the initial
model and the seed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from benchmark.errors import ConfigError
from benchmark.federated.checkpoint import CheckpointSpec, run_identity
from benchmark.federated.history import RoundStats
from benchmark.federated.loop import RoundPlan, RoundTrainer, run_rounds
from benchmark.federated.sampling import ClientSampler
from benchmark.seeding import RunSeeds, check_seed, torch_generator
from benchmark.zo.history import round_rows
from benchmark.zo.text_model import TextClassifier, TextTensors, accuracy
from benchmark.zo.transport import Transport

#: The local optimisers by name (created fresh for every client and round, module docstring).
OPTIMIZERS = {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}
#: SLoRAConfig's integer settings (each >= 1).
INT_SETTINGS = ("rounds", "rank", "local_steps", "batch_size", "eval_every")
#: How to fix each setting of :class:`SLoRAConfig` that is out of range.
FIXES = {
    "rounds": "use at least 1 round",
    "priming_fraction": "give the share of rounds in stage 1, in [0, 1] (the thesis uses 0.2)",
    "stage_1": "raise priming_fraction or rounds: SLoRA initialises LoRA from the stage-1 update",
    "density": "use a density in (0, 1], e.g. 0.1",
    "rank": "use a positive LoRA rank, e.g. 16",
    "alpha": "use a positive lora_alpha, or None for alpha = rank",
    "target_modules": "give a non-empty tuple of module names, e.g. ('query', 'value')",
    "lr": "use a positive learning rate",
    "local_steps": "use at least 1 local step (the thesis uses 1)",
    "batch_size": "use a positive batch size",
    "optimizer": f"use one of {tuple(OPTIMIZERS)}",
    "weight_decay": "use a non-negative weight decay",
    "eval_every": "evaluate every k >= 1 rounds (the last round is always evaluated)",
}
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
        def need(ok: object, name: str, what: str | None = None) -> None:
            if not ok:
                raise ConfigError(f"SLoRAConfig.{what or f'{name}={getattr(self, name)!r}'}", FIXES[name])

        for name in INT_SETTINGS:  # checked first: the rest computes with them
            need(_is_int(getattr(self, name)) and getattr(self, name) >= 1, name)
        fraction, modules = self.priming_fraction, self.target_modules
        need(0.0 <= fraction <= 1.0, "priming_fraction")
        zero = f"priming_fraction={fraction} gives 0 stage-1 rounds of {self.rounds}"
        need(self.priming_rounds >= 1, "stage_1", zero)
        need(0.0 < self.density <= 1.0, "density")
        need(self.alpha is None or self.alpha > 0, "alpha")
        names = isinstance(modules, tuple) and all(isinstance(t, str) and t for t in modules)
        need(names and modules, "target_modules")
        need(self.lr > 0, "lr")
        need(self.optimizer in OPTIMIZERS, "optimizer")
        need(self.weight_decay >= 0, "weight_decay")
        check_seed(self.seed, "SLoRAConfig.seed")

    @property
    def priming_rounds(self) -> int:
        """``R1 = round(priming_fraction · rounds)``, halves rounded up (50 rounds × 0.2 → 10)."""
        return share(self.rounds, self.priming_fraction)

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
    """What ``progress`` receives: ``kind`` is ``"round"`` (after a round's aggregation and evaluation;
    ``model`` holds the global model) or ``"switch"`` (LoRA just initialised from ΔW, before stage 2 trains).
    ``model`` is the live working model: copy what you keep."""

    kind: str
    round: int
    model: TextClassifier


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def share(n: int, fraction: float) -> int:
    """``round(fraction · n)`` with halves rounded up: the stage-1 rounds (``fraction`` the priming fraction),
    the entries of a mask (``fraction`` its density)."""
    return min(n, math.floor(fraction * n + 0.5))


# ------------------------------------------------------------------------------------ communication


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
    r1 = share(rounds, priming_fraction)
    r2 = rounds - r1
    stage1 = r1 * clients * (share(model_params, density) + head_params)
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
    flat[torch.randperm(total, generator=gen)[: share(total, density)]] = True
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
    opt = OPTIMIZERS[config.optimizer](params, lr=config.lr, weight_decay=config.weight_decay)
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
    from peft.tuners.lora import LoraLayer  # local: peft (and what it loads) only where SLoRA runs

    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLayer)]


def switch_to_lora(
    model: TextClassifier, pretrained: dict[str, torch.Tensor], config: SLoRAConfig
) -> list[nn.Parameter]:
    """SLoRA's switch, in place: the encoder's current weights hold the stage-1 result; LoRA (peft) is
    injected on ``config.target_modules`` with ``(A, B)`` from the SVD of ``ΔW = W − pretrained`` of each
    target, every encoder weight goes back to ``pretrained`` and is frozen. Returns the stage-2 trainable
    parameters (LoRA A, B per target, then the head)."""
    from peft import LoraConfig, inject_adapter_in_model  # local: peft only where SLoRA runs

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


@dataclass(eq=False)
class SLoRATrainer(RoundTrainer):
    """One SLoRA round per :meth:`train_round` on ``model`` (trained in place), the switch to LoRA opening
    round ``R1`` (module docstring). Clients without examples take no part; messages go through a
    :class:`~benchmark.zo.transport.Transport` (the round's costs); :meth:`evaluate` gives percent."""

    measures_communication: ClassVar[bool] = True
    accuracy_unit: ClassVar[str] = "percent"
    model: TextClassifier
    clients: Sequence[TextTensors]
    test: TextTensors
    config: SLoRAConfig
    progress: Callable[[SLoRAEvent], None] | None = None

    def __post_init__(self) -> None:
        model, clients, config = self.model, self.clients, self.config
        self.num_clients = len(clients)
        total = sum(len(d) for d in clients)
        self.weights = [len(d) / total for d in clients]
        self.transport = Transport()
        enc_named = list(model.encoder.named_parameters())
        self.enc_params = [p for _, p in enc_named]
        self.head_params = list(model.head.parameters())
        self.pretrained = {n: p.detach().clone() for n, p in enc_named}
        masks = random_masks(enc_named, config.density, config.seed)
        self.masks = [(masks[n], self.pretrained[n]) for n, _ in enc_named]
        for p in model.parameters():
            p.requires_grad_(True)
        self.trainable: list[nn.Parameter] = self.enc_params + self.head_params
        self.global_state = self.stage1_state()
        self.trainable_stage2 = 0

    def stage1_state(self) -> list[torch.Tensor]:
        """Stage 1's message: the values of the masked entries, then the head."""
        masked = [p.detach()[m] for p, (m, _) in zip(self.enc_params, self.masks, strict=True)]
        return masked + [p.detach() for p in self.head_params]

    @torch.no_grad()
    def load(self, state: Sequence[torch.Tensor], stage1: bool) -> None:
        """Set the trained state: stage 1's message (masked entries over the pre-trained values, then the
        head), or the stage-2 trainable parameters in order."""
        dense = self.trainable
        if stage1:
            for p, (m, pre), v in zip(self.enc_params, self.masks, state, strict=False):
                p.copy_(pre)
                p[m] = v
            dense, state = self.head_params, state[len(self.enc_params) :]
        for p, v in zip(dense, state, strict=True):
            p.copy_(v)

    def train_round(self, round_idx: int, clients: np.ndarray, lr: float) -> RoundStats:
        cfg, net, stage1 = self.config, self.transport, round_idx < self.config.priming_rounds
        if round_idx == cfg.priming_rounds:
            self.load(self.global_state, stage1=True)
            self.switch()
            self.global_state = [p.detach().clone() for p in self.trainable]
            if self.progress is not None:
                self.progress(SLoRAEvent("switch", round_idx, self.model))
        messages, losses, weights, examples = [], [], [], 0
        for k in (int(k) for k in clients if len(self.clients[int(k)])):
            data = self.clients[k]
            self.load(net.down.tensors(self.global_state), stage1)
            gen, masks = client_generator(cfg.seed, round_idx, k), self.masks if stage1 else None
            losses.append(local_train(self.model, self.trainable, data, cfg, gen, masks))
            sent = self.stage1_state() if stage1 else [p.detach() for p in self.trainable]
            messages.append(net.up.tensors(sent))
            weights.append(self.weights[k])
            examples += cfg.local_steps * min(cfg.batch_size, len(data))
        self.global_state = _average(messages, weights)
        self.load(self.global_state, stage1)
        loss = sum(w * x for w, x in zip(weights, losses, strict=True))
        return net.round_stats(examples, loss, compute_f=3 * examples)

    def switch(self) -> None:
        """Stage 2 from here (:func:`switch_to_lora` on the model's encoder): its trainable parameters."""
        self.trainable = switch_to_lora(self.model, self.pretrained, self.config)
        self.trainable_stage2 = sum(p.numel() for p in self.trainable)

    def evaluate(self) -> tuple[float, float]:
        return accuracy(self.model, self.test), math.nan

    def state_dict(self) -> dict[str, Any]:
        """The global state after the last round (stage 1's message, or LoRA's factors and the head) and
        whether LoRA is in place; the masks, the pre-trained weights and the batch orders follow from the
        initial model and the seed."""
        return {"lora": self.trainable_stage2 > 0, "global_state": list(self.global_state)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` on a trainer of the run's initial model: past the switch, LoRA is
        injected again (its factors then come from the checkpoint; no ``switch`` event is sent again)."""
        stage1 = not state["lora"]
        if not stage1:
            self.switch()
        self.global_state = [t.to(self.enc_params[0].device) for t in state["global_state"]]
        self.load(self.global_state, stage1)


def run_slora(
    model: TextClassifier,
    clients: Sequence[TextTensors],
    test: TextTensors,
    config: SLoRAConfig,
    *,
    progress: Callable[[SLoRAEvent], None] | None = None,
    show_progress: bool = False,
    label: str = "slora",
    checkpoint: CheckpointSpec | None = None,
    identity: Mapping[str, Any] | None = None,
) -> SLoRAResult:
    """Run SLoRA (module docstring) on a copy of ``model`` (the caller's model is left as it is) with full
    participation of the non-empty ``clients`` through the round loop
    (:func:`~benchmark.federated.loop.run_rounds`); returns the history and the measured and Eq. 7 bytes.
    ``progress`` receives each :class:`SLoRAEvent`; ``show_progress``: the loop's progress lines.
    ``checkpoint``: saved there and resumed from it when it exists, bit-identically (``identity``: the run it
    must belong to, by default the config's and the client sizes)."""
    if not isinstance(model, TextClassifier):
        raise ConfigError(f"run_slora model is {type(model).__name__}", "pass a benchmark.zo TextClassifier")
    if not any(len(d) for d in clients):
        raise ConfigError("run_slora: every client is empty", "give at least one client some examples")
    if len(test) == 0:
        raise ConfigError("run_slora: the test set is empty", "pass the examples to evaluate on")
    model = copy.deepcopy(model)
    device = next(model.parameters()).device
    trainer = SLoRATrainer(model, [d.to(device) for d in clients], test.to(device), config, progress)
    own = {**asdict(config), "client_sizes": [len(d) for d in clients]}
    plan = RoundPlan(
        rounds=config.rounds,
        sampler=ClientSampler(len(clients), len(clients), RunSeeds(config.seed)),
        lr_at=lambda _i: config.lr,
        eval_every=config.eval_every,
        identity=identity or run_identity(own, method="slora", stage="", start_round=0, rounds=config.rounds),
        label=label,
        bytes_per_float=trainer.enc_params[0].element_size(),
        progress=show_progress,
        initial_eval=False,
    )
    events = None if progress is None else (lambda done: progress(SLoRAEvent("round", done - 1, model)))
    out = run_rounds(trainer, plan, checkpoint=checkpoint, on_round_end=events)
    history = [
        SLoRARound(row.round - 1, 1 if row.round <= config.priming_rounds else 2, row.train_loss, *rest)
        for row, *rest in round_rows(out.history)
    ]
    head = sum(p.numel() for p in trainer.head_params)
    arithmetic = slora_comm_arithmetic(
        rounds=config.rounds,
        priming_fraction=config.priming_fraction,
        clients=sum(1 for d in clients if len(d)),
        density=config.density,
        model_params=sum(p.numel() for p in trainer.enc_params),
        lora_params=max(trainer.trainable_stage2 - head, 0),
        head_params=head,
        bytes_per_value=trainer.enc_params[0].element_size(),
    )
    final = history[-1].test_accuracy
    assert final is not None  # the last round is always evaluated
    up, down = out.costs.uplink_bytes_measured, out.costs.downlink_bytes_measured
    return SLoRAResult(history, final, up, down, arithmetic, trainer.trainable_stage2)
