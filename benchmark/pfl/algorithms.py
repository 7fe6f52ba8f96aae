"""The federated algorithms of fedbabu's comparisons, as data: which part each client trains, which part the
server averages, and the local procedure (registry; one entry per method, each citing its paper).

Parts follow the reference's two switches (``main_fed.py``: ``--local_upt_part``, ``--aggr_part``): ``body`` is
every entry whose name lacks ``linear``, ``head`` the ``linear`` layer, ``full`` both, ``none`` nothing. An entry
that is not aggregated is **personal**: each client keeps its own copy between the rounds it takes part in (the
reference's ``net_local_list``); aggregated entries are broadcast to every client after each round. fedbabu
App. F.3's ablation (Tables 14/15) trains and aggregates only the body's first conv blocks (``conv1``,
``conv12``, ``conv123``: :mod:`benchmark.pfl.parts`); the rest of the body and the head stay at their random
initialisation.

A part a client does not train gets learning rate 0 (the reference's SGD parameter groups), so FedBABU's head
stays bit-identical to its random initialisation on every client and on the server.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.pfl.parts import CONV_PARTS, PARTS, in_part
from benchmark.pfl.work import BATCH_SIZE, local_passes


@dataclass(frozen=True)
class Algorithm:
    """``local_part``/``aggregate_part`` in body/head/full/none; ``procedure`` names the local update
    (``sgd``: the reference's ``LocalUpdate.train``; others live in their own modules); ``prox_mu`` the FedProx
    proximal weight (None: not proximal; a cell's ``fedprox_mu`` overrides it). ``departures`` names
    (``benchmark.costs.conventions.DEPARTURES``) where this suite's version departs from the setup fedbabu
    states for the method, in every cell it fills; ``personalised_departures`` only in its personalised cells
    (Algorithm 2's fine-tuning applied to it). A cell that matches the paper with such a name is ``PASS*``.

    ``starts_from`` names the algorithm whose trained model (the same setting, seed and model selection)
    initialises this one, trained ``rounds_divisor`` times as many rounds (this one runs ``R / rounds_divisor``);
    ``lr`` replaces the reference's 0.1 and ``lr_decay`` False keeps it constant (fedbabu App. A.3's
    LG-FedAvg). ``fine_tune`` is Algorithm 2's FINE-TUNE for it: ``full`` (line 16: body and head together) or
    ``sequential`` (FedRep, lines 17 and 20-21: the head for tau_f epochs, then the body for one;
    :data:`benchmark.pfl.personalise.PARTS`), or ``none``: its personalised cells read the training's own
    evaluation of the clients' models after the selected round, not fine-tuned (the released ``main_ditto.py``
    reports its personal models so)."""

    name: str
    local_part: str
    aggregate_part: str
    procedure: str = "sgd"
    prox_mu: float | None = None
    paper: str = ""
    departures: tuple[str, ...] = ()
    personalised_departures: tuple[str, ...] = ()
    starts_from: str | None = None
    rounds_divisor: int = 1
    lr: float | None = None
    lr_decay: bool = True
    fine_tune: str = "full"

    def __post_init__(self) -> None:
        for field in ("local_part", "aggregate_part"):
            if getattr(self, field) not in PARTS:
                raise ConfigError(f"algorithm {self.name!r}: {field}={getattr(self, field)!r}",
                                  f"use one of: {', '.join(PARTS)}")  # fmt: skip

    @property
    def body_part(self) -> str:
        """The part of the body a client trains at the round's lr: its conv blocks for a conv part, else the
        whole body (at lr 0 when :attr:`local_part` is ``head`` or ``none``)."""
        return self.local_part if self.local_part in CONV_PARTS else "body"

    def trains_body(self) -> bool:
        return self.local_part in ("body", "full", *CONV_PARTS)

    def trains_head(self) -> bool:
        return self.local_part in ("head", "full")

    def aggregates(self, key: str) -> bool:
        return in_part(key, self.aggregate_part)

    def trains(self, key: str) -> bool:
        return in_part(key, self.local_part)

    def local_passes(self, n: int, epochs: int, batch_size: int = BATCH_SIZE) -> int:
        """Images a sampled client passes forward and backward in a round (:func:`benchmark.pfl.work.local_passes`)."""
        return local_passes(self.procedure, n, epochs, batch_size)


ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("fedavg", "full", "full", paper="McMahan et al., AISTATS 2017"),
        Algorithm("fedbabu", "body", "body", paper="Oh et al., ICLR 2022 (Algorithm 1)"),
        # fedbabu App. F.3 (Tables 14/15): "Conv1" / "Conv12" / "Conv123", only those blocks updated locally and
        # aggregated; Conv1234 is FedBABU and Conv1234+Linear FedAvg (the tables route those cells to them)
        *(
            Algorithm(f"fedbabu_{part}", part, part, paper=f"Oh et al., ICLR 2022, App. F.3 ({part} updated)")
            for part in CONV_PARTS
        ),
        Algorithm("fedper", "full", "body", paper="Arivazhagan et al., arXiv:1912.00818 (personal head)"),
        # fedbabu App. A.3: "FedAvg models corresponding to the FL settings in Table 3 are used as an
        # initialization. It is then trained about a quarter of FedAvg training with a learning rate of 0.001."
        # The released main_lg.py / scripts/run_lg_fedavg.sh: R/4 rounds (80 / 20 / 8 at tau = 1 / 4 / 10), no
        # decay. The paper tables' LG-FedAvg (pfl_lg_fedavg: after_fedavg, the default)
        Algorithm(
            "lg_fedavg_after_fedavg",
            "full",
            "head",
            paper="Liang et al., arXiv:2001.01523; fedbabu App. A.3 (from FedAvg's model, R/4 rounds, lr 0.001)",
            starts_from="fedavg",
            rounds_divisor=4,
            lr=0.001,
            lr_decay=False,
        ),
        # the same from a random initialisation for all R rounds at lr 0.1 like the others (pfl_lg_fedavg:
        # from_scratch; the named departure lg_fedavg_from_scratch)
        Algorithm(
            "lg_fedavg",
            "full",
            "head",
            paper="Liang et al., arXiv:2001.01523 (local body, global head)",
            departures=("lg_fedavg_from_scratch",),
        ),
        Algorithm("local_only", "full", "none", paper="each client alone (fedbabu Table 5 'Local-only')"),
        Algorithm(
            "fedprox", "full", "full", prox_mu=0.01, paper="Li et al., MLSys 2020 (fedbabu Table 7: mu 0.01)"
        ),
        Algorithm("fedprox_babu", "body", "body", prox_mu=0.01, paper="fedbabu Table 7: FedProx on the body"),
        # personalised as Algorithm 2 gives it (pfl_fedrep_finetune: sequential, the default); joint = the named
        # departure fedrep_joint_fine_tuned
        Algorithm(
            "fedrep", "full", "body", procedure="fedrep", paper="Collins et al., ICML 2021", fine_tune="sequential"
        ),
        Algorithm("ditto", "full", "full", procedure="ditto", paper="Li et al., ICML 2021"),
        # the reference's main_ditto.py as written (personal models reset to the global each round and averaged,
        # no lr decay) and as it reports (the personal models after the last round, not fine-tuned): fedbabu's
        # Ditto cells under pfl_ditto: released (the named departure ditto_released)
        Algorithm(
            "ditto_reference",
            "full",
            "full",
            procedure="ditto_reference",
            paper="jhoon-oh/FedBABU main_ditto.py",
            departures=("ditto_released",),
            fine_tune="none",
        ),
        # fedbabu App. A.3: beta = the round's lr (the default); the reference passes beta = 0.1
        # personalised by Algorithm 2's fine-tuning, not by its own few-step adaptation (a named departure)
        Algorithm(
            "per_fedavg",
            "full",
            "full",
            procedure="per_fedavg_beta_lr",
            paper="Fallah et al., NeurIPS 2020",
            personalised_departures=("per_fedavg_fine_tuned",),
        ),
        # fedbabu Table 9 (App. C): centralised training, F (full) / B (body), then per-client personalisation;
        # run by benchmark.pfl.run (train_centralised), not by the round loop
        Algorithm("centralized_full", "full", "full", procedure="centralised", paper="fedbabu App. C (F)"),
        Algorithm("centralized_body", "body", "full", procedure="centralised", paper="fedbabu App. C (B)"),
        Algorithm(
            "per_fedavg_reference",
            "full",
            "full",
            procedure="per_fedavg",
            paper="jhoon-oh/FedBABU main_per_fedavg.py (beta 0.1)",
            personalised_departures=("per_fedavg_fine_tuned",),
        ),
    )
}


def get_algorithm(name: str) -> Algorithm:
    if name not in ALGORITHMS:
        raise UnknownNameError(
            f"no personalised-FL algorithm {name!r}", f"use one of: {', '.join(ALGORITHMS)}"
        )
    return ALGORITHMS[name]
