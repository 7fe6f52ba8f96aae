"""One federated training run, as a readable dataclass (nanoGPT style: every knob says why it has its value).

The defaults are the legate2023 protocol as its reference code runs it (GuidingLastLayerFLPretrain on top of
FLSim; ``shared/reference/papers-code.md`` §1.5-1.7), except where a reference quirk would silently change
the *meaning* of a method (the FedAdam weight-decay drift of a "frozen" backbone): such quirks are explicit
options, off by default, and recorded in every result.

Protocol sources (legate2023 = ``shared/papers/001_fcb2cf211ff402fe.txt``):

* §4: 100 clients, Dirichlet alpha 0.1, 1 local epoch per round, 30 % participation for CIFAR (full for the
  other datasets), three seeds.
* App. B / Table 4: FedAvg client lr tuned on {0.1 ... 0.001} ({0.01 ... 0.0001} for Flowers102); FedAdam
  client lr on {1, 0.1, 0.01, 0.001, 0.0001} x server lr on {1e-3, 1e-4, 1e-5, 1e-6}; rounds per dataset and
  method in Table 4 (200 for CIFAR-10 LP/FT, ... , 3500 for Cars/EuroSAT Random).
* App. A: communication counts 32-bit floats both ways (the factor 2); compute counts F = one forward pass of
  one sample, a backward pass = 2F, so full training costs 3F per sample per local epoch and HeadTuning 1F.
* Reference code: client SGD momentum 0 / wd 0 / batch 64; FedAvg = server SGD lr 1 on the example-weighted
  average delta; FedAvgM = server SGD with momentum 0.9; FedAdam = ``torch.optim.Adam(lr=server_lr,
  weight_decay=1e-5, betas=(0.9, 0.999), eps=1e-8)``; "epochs" of FLSim are ``ceil(K/m)`` rounds each;
  reported accuracy = best test accuracy seen during training; BatchNorm running statistics are never
  aggregated.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args, get_origin

from benchmark.errors import ConfigError
from benchmark.fl.method_registry import FL_METHODS
from benchmark.seeding import RunSeeds, check_seed

ServerOpt = Literal["fedavg", "fedavgm", "fedadam"]
Selection = Literal["best_on_test", "last"]
BNStats = Literal["frozen_global", "aggregate"]
FrozenParams = Literal["untouched", "server_opt_drift"]
BodyMode = Literal["eval", "train"]
HeadKind = Literal["linear", "mlp"]
HeadBias = Literal["as_given", "zero", "random"]
Weighting = Literal["examples", "uniform"]
ClientExec = Literal["loop", "vectorised"]
Method = str
"""A registered FL method name (:data:`benchmark.fl.method_registry.FL_METHODS`; no hand-kept list)."""

#: FedProx proximal weight used when a table asks for FedProx. legate2023 reports FedProx (Table 3) but states
#: no mu, and its released code has no FedProx at all (papers-code.md §1.5); 0.01 is the value fedbabu states
#: for its FedProx experiments (fedbabu Table 7 / Table 22), the only mu given in the papers of this suite.
FEDPROX_DEFAULT_MU: float = 0.01


def clients_per_round(num_clients: int, participation: float) -> int:
    """m = round(participation * K), at least 1 and at most K (legate2023 §4: 30 of 100 clients)."""
    return max(1, min(num_clients, round(participation * num_clients)))


def flsim_epochs_to_rounds(epochs: int, num_clients: int, clients_per_round: int) -> int:
    """Rounds run by FLSim for ``--epochs epochs``: ``epochs * ceil(K / m)``.

    FLSim's ``SyncTrainer`` counts "epochs" of ``rounds_in_one_epoch = ceil(K / m)`` rounds
    (papers-code.md §1.6), each round sampling ``m`` of the ``K`` clients uniformly without replacement, so an
    "epoch" does not visit every client. With K = 100, m = 30 one epoch is 4 rounds: ``--epochs 200`` = 800
    rounds. legate2023 Table 4 gives round counts; whether they are FLSim epochs is a paper ambiguity the
    table-wiring code must decide, this helper only does the arithmetic.
    """
    if epochs < 0 or num_clients < 1 or not 1 <= clients_per_round <= num_clients:
        raise ConfigError(
            f"flsim_epochs_to_rounds needs epochs >= 0 and 1 <= clients_per_round <= num_clients, got "
            f"epochs={epochs}, num_clients={num_clients}, clients_per_round={clients_per_round}",
            "pass the FLSim --epochs value and the K, m of the run",
        )
    return int(epochs) * math.ceil(num_clients / clients_per_round)


@dataclass(frozen=True)
class FLConfig:
    """Everything that defines one federated (or centralised-oracle) training run.

    Change values with :func:`dataclasses.replace`; :meth:`to_dict` gives the JSON record stored with each
    result.
    """

    # ---------------------------------------------------------------- method
    method: Method = "ft"
    """Which method :func:`~benchmark.fl.methods.run_method` runs: a name of the method table of
    :mod:`benchmark.fl.methods` (LP, FT, Random, the two-stage methods, LP then FT, the centralised oracles)."""
    head: HeadKind = "linear"
    """Trained head for LP on cached features. ``mlp`` = three linear layers with ReLUs (legate2023 App. C.1,
    Table 5: "replacing the linear layer in the LP method with a three layer MLP")."""
    mlp_hidden: int | None = None
    """Hidden width of the MLP head. legate2023 does not state it; ``None`` = the feature dimension d."""
    head_bias: HeadBias = "as_given"
    """Bias of a given closed-form head (two-stage methods). ``as_given`` keeps the closed-form module's b
    (FedNCM gives 0, legate2023 §3.2); ``zero`` forces 0; ``random`` draws PyTorch's ``nn.Linear`` bias init
    U(-1/sqrt(d), 1/sqrt(d)) from the model-init stream, as the legate2023 reference code does for FedNCM
    (it never zeroes the bias, papers-code.md §1.4)."""
    lp_stage_rounds: int = 5
    """Rounds of LP before FT for ``lp_ft`` (legate2023 Table 6 uses 5 and 10)."""

    # ---------------------------------------------------------------- federation
    num_clients: int = 100
    """K. legate2023 §4: 100 clients."""
    participation: float = 0.3
    """Fraction of clients per round; m = round(participation * K), at least 1. legate2023 §4: 30 % for CIFAR,
    full participation (1.0) for the other datasets."""
    rounds: int = 200
    """Real communication rounds (not FLSim epochs: see :func:`flsim_epochs_to_rounds`). For the centralised
    oracles this is the number of passes over the pooled data."""
    local_epochs: int = 1
    """Local epochs per round. legate2023 §4: 1 (Fig. 4 varies it)."""
    batch_size: int = 64
    """Client mini-batch size. Reference code default ``local_bs`` = 64."""
    client_shuffle: bool = False
    """Reshuffle a client's samples every local epoch. The reference keeps each client's batches in fixed
    dataset order for the whole run (``shuffle_batch_order=False``, papers-code.md §1.1), hence False. True
    draws the permutation from the ``data_order`` stream keyed by (round, client)."""
    aggregation_weights: Weighting = "examples"
    """Client weights of the average. FLSim weights by examples processed; fedbabu's code takes an unweighted
    mean of state dicts (``uniform``)."""

    # ---------------------------------------------------------------- client optimiser
    client_lr: float = 1e-3
    """Client SGD learning rate. Reference default 1e-3; legate2023 tunes it per dataset (App. B)."""
    client_momentum: float = 0.0
    """Reference: ``LocalOptimizerSGDConfig(lr)`` has momentum 0 (config.py's momentum is ignored)."""
    client_weight_decay: float = 0.0
    """Reference: 0 (coupled L2, added to the gradient, as ``torch.optim.SGD``)."""
    client_lr_milestones: tuple[int, ...] = ()
    """0-based round indices from which on the client lr is multiplied by ``client_lr_gamma`` (once per
    milestone passed). Empty = constant lr (the legate2023 reference). fedbabu's schedule (x0.1 after rounds
    R//2 and 3R//4, 1-indexed) is ``(R // 2, 3 * R // 4)``."""
    client_lr_gamma: float = 0.1
    prox_mu: float = 0.0
    """FedProx proximal weight: each local step adds mu * (w - w_global) to the update, i.e. the gradient of
    (mu/2)||w - w_global||^2, after momentum (FLSim ``LocalOptimizerFedProx``). 0 = FedAvg. See
    :data:`FEDPROX_DEFAULT_MU` for the value used when a table asks for FedProx."""

    # ---------------------------------------------------------------- server optimiser
    server_opt: ServerOpt = "fedavg"
    """``fedavg``: SGD lr ``server_lr`` (1) on the averaged pseudo-gradient; ``fedavgm``: SGD with momentum
    ``server_momentum``; ``fedadam``: Adam (Reddi et al. 2021) with the reference code's constants."""
    server_lr: float = 1.0
    """FedAvg uses 1 (plain averaging). For FedAdam the reference default is also 1, so legate2023's tuned
    value (grid {1e-3, 1e-4, 1e-5, 1e-6}, App. B) must be passed explicitly."""
    server_momentum: float = 0.9
    """FedAvgM momentum (reference ``--momentum`` default 0.9)."""
    server_adam_betas: tuple[float, float] = (0.9, 0.999)
    server_adam_eps: float = 1e-8
    """Reference code eps (not Reddi et al.'s tau = 1e-3)."""
    server_weight_decay: float = 1e-5
    """FedAdam coupled L2 (``torch.optim.Adam(weight_decay=1e-5)`` in the reference). FedAvg/FedAvgM: none."""
    server_adam_tau: float | None = None
    """If set, FedAdam follows Reddi et al. 2021 Algorithm 2 instead: no bias correction and adaptivity tau in
    place of eps (x += lr * m / (sqrt(v) + tau)). ``server_weight_decay`` still applies (set it to 0 for the
    textbook algorithm)."""

    # ---------------------------------------------------------------- paper-protocol quirks
    selection: Selection = "best_on_test"
    """Reported accuracy. ``best_on_test``: the best test accuracy over the evaluations during training (FLSim
    keeps the best eval model and the eval set is the test set: legate2023's numbers; papers-code.md §1.6).
    ``last``: the accuracy after the last round. Round 0 (the initial model) is never selected. Both numbers
    are always recorded."""
    eval_every: int = 1
    """Evaluate every this many rounds (and always after the last). The reference evaluates once per FLSim
    epoch, i.e. every ceil(K/m) rounds; this changes which model best-on-test can pick."""
    bn_stats: BNStats = "frozen_global"
    """BatchNorm running statistics of the global model. ``frozen_global``: never aggregated, so they stay
    at their initial (pre-trained) values for the whole run: FLSim only steps ``model.parameters()``
    (papers-code.md §1.7-1; a random-init ResNet is evaluated with (0, 1) stats forever). Clients still use
    batch statistics while training. ``aggregate``: the floating-point buffers of every module that runs in
    train mode locally are averaged with the client weights and sent both ways (counted in communication);
    integer buffers (``num_batches_tracked``) are left alone."""
    frozen_params: FrozenParams = "untouched"
    """Parameters that are not trained (the body under LP). ``untouched``: truly frozen, bit-identical for
    the whole run. ``server_opt_drift``: reproduce the reference code, where the server optimiser also steps
    frozen parameters with a zero pseudo-gradient; under FedAdam the coupled weight decay then moves them
    (about lr * sign(w) per round, papers-code.md §1.7-2). Each result records the largest drift."""
    lp_body_mode: BodyMode = "eval"
    """Mode of the frozen body during local LP steps. ``eval``: BatchNorm uses its running statistics, so the
    features are exactly the cached ones. ``train``: the reference code's behaviour (``.train()`` on the whole
    model, so BatchNorm normalises with batch statistics while the head trains, and with running statistics
    at test time, papers-code.md §1.7-1). Not available on cached features."""

    # ---------------------------------------------------------------- run
    seed: int = 0
    """Run seed. Partition, client sampling, model init and data order are separate streams derived from it
    (:mod:`benchmark.seeding`)."""
    seed_overrides: Mapping[str, int] = field(default_factory=dict)
    """Per-purpose seeds, e.g. ``{"model_init": 3}`` changes the init while client sampling stays the same."""
    device: str = "auto"
    """``auto`` = CUDA when available, else CPU. CPU runs are deterministic for a given seed."""
    amp: bool = False
    """Mixed precision (bfloat16 autocast) for full-model training on CUDA; on another device a warning says it is
    not applied. Recorded. Mapped onto the one policy by :func:`benchmark.federated.precision.precision_from`."""
    client_exec: ClientExec = "loop"
    """How the sampled clients of a full-model round are executed (same arithmetic either way; a test checks
    that one round agrees to rounding): ``loop`` trains them one after the other on one working copy
    (:class:`benchmark.fl.engine.ModelTrainer`); ``vectorised`` trains ``vector_chunk`` of them at once with
    ``torch.func`` (:class:`benchmark.fl.vectorised.VectorisedTrainer`: stacked per-client weights,
    ``vmap(grad(loss))``), the GPU-efficient path. An execution choice, not part of the protocol; recorded.
    Not for ``bn_stats="aggregate"`` or models with dropout (a :class:`ConfigError` says so)."""
    vector_chunk: int = 10
    """Clients per vectorised chunk (``client_exec="vectorised"``): the memory knob. Peak activation memory
    grows about linearly with it (a chunk holds ``vector_chunk * batch_size`` images in flight)."""
    channels_last: bool = False
    """Feed image batches to the model in channels-last memory layout, which lets cuDNN pick its NHWC kernels
    (often faster with bf16 on recent GPUs: measure with ``tools/fl_train_bench.py``). Same values, another
    memory layout; recorded."""
    eval_batch_size: int = 128
    """Reference test loader batch size."""
    bytes_per_float: int = 4
    """legate2023 §4 / App. A: every transmitted parameter is a 32-bit float."""
    progress: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # a number given as text ('abc', from an override) fails here
            if f.type in ("float", "float | None"):
                _number(f.name, getattr(self, f.name), optional=f.type != "float")
        from benchmark.federated.server_opt import SERVER_OPTIMIZERS  # local: torch

        _choice("method", self.method, FL_METHODS.names())
        _choice("server_opt", self.server_opt, SERVER_OPTIMIZERS.names())  # a registry: plug-ins add names
        for f in dataclasses.fields(self):  # a Literal field (head, bn_stats, ...) holds one of its values
            if f.type != "ServerOpt" and get_origin(kind := globals().get(f.type)) is Literal:
                _choice(f.name, getattr(self, f.name), get_args(kind))
        _positive_int("vector_chunk", self.vector_chunk)
        if not isinstance(self.channels_last, bool):
            raise ConfigError(
                f"channels_last must be True or False, got {self.channels_last!r}", "e.g. False"
            )
        _positive_int("num_clients", self.num_clients)
        _positive_int("local_epochs", self.local_epochs)
        _positive_int("batch_size", self.batch_size)
        _positive_int("eval_every", self.eval_every)
        _positive_int("eval_batch_size", self.eval_batch_size)
        _positive_int("bytes_per_float", self.bytes_per_float)
        if self.mlp_hidden is not None:
            _positive_int("mlp_hidden", self.mlp_hidden)
        if isinstance(self.rounds, bool) or not isinstance(self.rounds, int) or self.rounds < 0:
            raise ConfigError(f"rounds must be an integer >= 0, got {self.rounds!r}", "set e.g. rounds=200")
        if isinstance(self.lp_stage_rounds, bool) or not isinstance(self.lp_stage_rounds, int):
            raise ConfigError(f"lp_stage_rounds must be an integer, got {self.lp_stage_rounds!r}", "e.g. 5")
        if self.lp_stage_rounds < 0:
            raise ConfigError(f"lp_stage_rounds must be >= 0, got {self.lp_stage_rounds}", "e.g. 5")
        if not 0.0 < float(self.participation) <= 1.0:
            raise ConfigError(
                f"participation must be in (0, 1], got {self.participation!r}", "e.g. 0.3 (30 % of clients)"
            )
        for name in ("client_lr", "server_lr"):
            if not float(getattr(self, name)) > 0.0:
                raise ConfigError(
                    f"{name} must be > 0, got {getattr(self, name)!r}", f"set a positive {name}"
                )
        for name in ("client_momentum", "client_weight_decay", "prox_mu", "server_weight_decay"):
            if float(getattr(self, name)) < 0.0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}", f"set {name} >= 0")
        if not 0.0 <= self.server_momentum < 1.0:
            raise ConfigError(f"server_momentum must be in [0, 1), got {self.server_momentum}", "e.g. 0.9")
        b1, b2 = self.server_adam_betas
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ConfigError(
                f"server_adam_betas must be in [0, 1), got {self.server_adam_betas}", "(0.9, 0.999)"
            )
        if not self.server_adam_eps > 0.0:
            raise ConfigError(f"server_adam_eps must be > 0, got {self.server_adam_eps}", "e.g. 1e-8")
        if self.server_adam_tau is not None and not self.server_adam_tau > 0.0:
            raise ConfigError(f"server_adam_tau must be > 0 or None, got {self.server_adam_tau}", "e.g. 1e-3")
        if not self.client_lr_gamma > 0.0:
            raise ConfigError(f"client_lr_gamma must be > 0, got {self.client_lr_gamma}", "e.g. 0.1")
        if any(int(m) < 0 for m in self.client_lr_milestones):
            raise ConfigError(
                f"client_lr_milestones must be rounds >= 0, got {self.client_lr_milestones}",
                "e.g. (100, 150)",
            )
        if self.device not in ("auto", "cpu") and not str(self.device).startswith("cuda"):
            raise ConfigError(
                f"device must be 'auto', 'cpu' or 'cuda[:i]', got {self.device!r}", "use 'auto'"
            )
        check_seed(self.seed)
        self.seeds  # noqa: B018 - validates the overrides

    # ---------------------------------------------------------------- derived values
    @property
    def clients_per_round(self) -> int:
        """m = round(participation * K), at least 1."""
        return clients_per_round(self.num_clients, self.participation)

    @property
    def seeds(self) -> RunSeeds:
        """The run's named random streams (:class:`benchmark.seeding.RunSeeds`)."""
        return RunSeeds(self.seed, dict(self.seed_overrides))

    def client_lr_at(self, round_idx: int) -> float:
        """Client learning rate in round ``round_idx`` (0-based), after the step decays."""
        passed = sum(1 for m in self.client_lr_milestones if round_idx >= int(m))
        return float(self.client_lr) * float(self.client_lr_gamma) ** passed

    def to_dict(self) -> dict[str, object]:
        """JSON-ready record of every field."""
        out = dataclasses.asdict(self)
        out["seed_overrides"] = dict(self.seed_overrides)
        out["server_adam_betas"] = list(self.server_adam_betas)
        out["client_lr_milestones"] = list(self.client_lr_milestones)
        return out


def _choice(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(
            f"{name} must be one of {', '.join(allowed)}; got {value!r}", f"set {name} accordingly"
        )


def _number(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(
            f"{name} must be a number, got {type(value).__name__} {value!r}", f"set {name} to a number"
        )


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}", f"set {name} >= 1")
