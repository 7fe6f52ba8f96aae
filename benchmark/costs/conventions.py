"""Named accounting conventions: what a float costs, what a "MB" is, who pays for which direction.

Every cost in :mod:`benchmark.costs` is first a count of floats (or of forward passes), and only then turned
into bytes and units under a convention that is named here. Nothing is chosen silently: each paper's
stated convention is a :class:`PaperConvention`, and every departure that the cost-cell checks
(:mod:`benchmark.costs.paper_cells`) may try when a printed value does not follow from the stated formula is
a :class:`Departure` with a name and a one-line description.

Sources:

* legate2023 §4 "Communication and Computation Budget" (32-bit floats), Appendix A Eq. 3-6 (factor 2 for
  both directions, participation fraction F, compute in units of F = one forward pass of one sample,
  backward = 2F).
* fedcof Table 1 (what clients share; the cost of the counts n_{k,c} is ignored), Appendix I (4-byte
  floats; pre-trained model not counted; server->client traffic not counted), Table 3 ("total
  communication cost (in MB) from all clients to server").
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmark.registry import lookup

# --- bytes per number -------------------------------------------------------------------------------
BYTES_FP32 = 4  # "32-bit floating point" (legate2023 §4, fedcof App. I)
BYTES_FP16 = 2  # only as an alternative convention; no paper states it

# --- units (in bytes) -------------------------------------------------------------------------------
MB_DECIMAL = 10**6
MiB = 2**20
GB_DECIMAL = 10**9
GiB = 2**30
TB_DECIMAL = 10**12
TiB = 2**40
BITS_PER_BYTE = 8

# --- how classes are counted ------------------------------------------------------------------------
PRESENT_CLASSES = "present"  # per client, only the classes it holds (what the client actually sends)
ALL_CLASSES = "all"  # every client is charged for all C classes (fedcof Table 1's dCK; legate2023 Eq. 3)


@dataclass(frozen=True)
class PaperConvention:
    """One paper's stated accounting convention, field by field, with where it is stated."""

    name: str
    bytes_per_float: int
    unit_bytes: int
    unit_label: str
    directions: int  # 2 = client->server and server->client both charged, 1 = uplink only
    participation_applied: bool  # total scales with the fraction of clients per round
    class_counting: str  # PRESENT_CLASSES or ALL_CLASSES
    counts_charged: bool  # whether the per-class sample counts n_{k,c} are charged
    head_bias_charged: bool  # whether the linear head's bias is part of the message
    source: str


LEGATE2023 = PaperConvention(
    name="legate2023",
    bytes_per_float=BYTES_FP32,
    unit_bytes=GB_DECIMAL,
    unit_label="GB",
    directions=2,
    participation_applied=True,
    class_counting=ALL_CLASSES,
    counts_charged=False,
    head_bias_charged=False,
    source="legate2023 §4 (32-bit), App. A Eq. 3-4: 2*(LL_out*LL_in [+P])*K*R*F*(32 bit); GB base not stated",
)

FEDCOF = PaperConvention(
    name="fedcof",
    bytes_per_float=BYTES_FP32,
    unit_bytes=MB_DECIMAL,
    unit_label="MB",
    directions=1,
    participation_applied=False,  # training-free methods: every client sends once
    class_counting=ALL_CLASSES,  # Table 1 writes dCK; the printed MB need PRESENT_CLASSES (see NOTES.md)
    counts_charged=False,
    head_bias_charged=False,
    source="fedcof Table 1 (n_{k,c} ignored), App. I (4-byte floats, uplink only), Table 3 caption (MB); "
    "MB base not stated",
)

PAPER_CONVENTIONS: dict[str, PaperConvention] = {c.name: c for c in (LEGATE2023, FEDCOF)}


def paper_convention(name: str) -> PaperConvention:
    """The stated convention of paper ``name`` (``legate2023`` or ``fedcof``)."""
    return lookup(PAPER_CONVENTIONS, name, f"no cost convention for paper {name!r}")


@dataclass(frozen=True)
class Departure:
    """A named change to a paper's stated convention, tried when a printed cost does not follow from it."""

    name: str
    description: str
    fitted: bool = False  # True when it uses a quantity inferred from the printed values themselves


PARTICIPATION_IGNORED = Departure(
    "participation_ignored",
    "participation fraction taken as 1 (all K clients every round) although the paper states F=0.3",
)
HEAD_BIAS_CHARGED = Departure(
    "head_bias_charged", "linear head counted with its bias: (LL_in+1)*LL_out instead of LL_in*LL_out"
)
BASE_PARAMS_INFERRED = Departure(
    "base_params_inferred",
    "base-model parameter count P inferred from the printed FT/Random cells instead of the torchvision count",
    fitted=True,
)
X32_ROUNDS_SWAPPED = Departure(
    "x32_rounds_swapped",
    "CIFAR-10 32x32: the Table 4 round counts of FT (500) and FedNCM+FT (1000) exchanged",
)
COMPUTE_UNIT_DATASET_PASS = Departure(
    "compute_unit_dataset_pass",
    "FedNCM compute printed as 1, i.e. in units of one forward pass over the whole training set, not F",
)
PRESENT_CLASSES_ONLY = Departure(
    "present_classes_only",
    "each client charged for the classes it holds (sum_k |C_k|) instead of all C classes (Table 1's dCK)",
)
PAIRS_INFERRED = Departure(
    "pairs_inferred",
    "number of (client, present class) pairs inferred from the printed cells of the same partition",
    fitted=True,
)
PRINTED_TRUNCATED = Departure(
    "printed_truncated", "printed value truncated (floor) at its last digit instead of rounded"
)
BOTH_DIRECTIONS = Departure(
    "both_directions",
    "server->client traffic charged as well, although the caption says 'from all clients to server'",
)
BINARY_PREFIX = Departure(
    "binary_prefix", "unit prefix read as a power of 2 (Mi, Gi, Ti) instead of 10^6/9/12"
)
B_IS_BYTE = Departure("b_is_byte", "a lower-case 'b' in the printed unit read as byte instead of bit")
B_IS_BIT = Departure("b_is_bit", "an upper-case 'B' in the printed unit read as bit instead of byte")
SELECTED_ON_TEST = Departure(
    "selected_on_test",
    "model taken at the round of best accuracy on the clients' test sets (the reference code's best_model.pt) "
    "instead of the last model the paper reports (fedbabu App. A)",
)
LG_FEDAVG_FROM_SCRATCH = Departure(
    "lg_fedavg_from_scratch",
    "LG-FedAvg trained from a random initialisation for all R rounds at the table's learning rate, instead of "
    "from the FedAvg model of the same setting for about a quarter of FedAvg's training at lr 0.001 "
    "(fedbabu App. A.3)",
)
PER_FEDAVG_FINE_TUNED = Departure(
    "per_fedavg_fine_tuned",
    "Per-FedAvg personalised by fedbabu Algorithm 2's fine-tuning (5 epochs, lr 0.001) instead of its own "
    "few-step adaptation on a support / query split of the test set (fedbabu, discussion of Table 5)",
)
PER_FEDAVG_RELEASED_STEP = Departure(
    "per_fedavg_released_step",
    "Per-FedAvg personalised as the released main_per_fedavg.py evaluates it (every client's model adapted by one "
    "step at the round's lr and one at beta on the test images of the last client the round drew, then tested on "
    "its own; the selected round, not the best round on the test sets) instead of its few-step adaptation on a "
    "support / query split of each client's test set (fedbabu, discussion of Table 5)",
)
DITTO_RELEASED = Departure(
    "ditto_released",
    "Ditto run and measured as fedbabu's released main_ditto.py does: each round every client's personal model "
    "restarts from the round-start global model, the server averages the personal models, both trainings run "
    "at the initial lr every round, and the personalised accuracy is that of the personal models after the last "
    "round with no fine-tuning (a client the last round did not draw is tested with the round-start global "
    "model), instead of Ditto with personal models kept across rounds and Algorithm 2's fine-tuning (fedbabu "
    "App. A.3, Algorithm 2)",
)
FEDREP_JOINT_FINE_TUNED = Departure(
    "fedrep_joint_fine_tuned",
    "FedRep personalised by fine-tuning body and head together (fedbabu Algorithm 2, line 16) instead of the head "
    "for tau_f epochs and then the body for one epoch, the sequential fine-tuning Algorithm 2 gives FedRep "
    "(lines 17 and 20-21)",
)
FEDREP_RELEASED_MOMENTUM = Departure(
    "fedrep_released_momentum",
    "FedRep trained and fine-tuned at momentum 0.5, as fedbabu's released scripts/run_fedrep.sh ran it (no "
    "--momentum: options.py's default), instead of the momentum the paper states (0.9)",
)
K_SHOT_SUBSET = Departure(
    "k_shot_subset",
    "trained on MeZO's k-shot subset of the training split (k examples per class) instead of the whole split "
    "bernier2024 Table 4.2 lists",
)
OTHER_ROUND_BUDGET = Departure(
    "other_round_budget", "trained for another number of rounds than the thesis prints (config zo_rounds)"
)

DEPARTURES: dict[str, Departure] = {
    d.name: d
    for d in (
        PARTICIPATION_IGNORED,
        HEAD_BIAS_CHARGED,
        BASE_PARAMS_INFERRED,
        X32_ROUNDS_SWAPPED,
        COMPUTE_UNIT_DATASET_PASS,
        PRESENT_CLASSES_ONLY,
        PAIRS_INFERRED,
        PRINTED_TRUNCATED,
        BOTH_DIRECTIONS,
        BINARY_PREFIX,
        B_IS_BYTE,
        B_IS_BIT,
        SELECTED_ON_TEST,
        LG_FEDAVG_FROM_SCRATCH,
        PER_FEDAVG_FINE_TUNED,
        PER_FEDAVG_RELEASED_STEP,
        DITTO_RELEASED,
        FEDREP_JOINT_FINE_TUNED,
        FEDREP_RELEASED_MOMENTUM,
        K_SHOT_SUBSET,
        OTHER_ROUND_BUDGET,
    )
}


def to_units(num_bytes: float, unit_bytes: float) -> float:
    """``num_bytes`` expressed in a unit of ``unit_bytes`` bytes (e.g. ``MB_DECIMAL`` or ``MiB``)."""
    if unit_bytes <= 0:
        raise ValueError(f"unit_bytes must be positive, got {unit_bytes}")
    return num_bytes / unit_bytes


def unit_bytes_for(label: str, *, binary: bool = False, b_is_bit: bool | None = None) -> float:
    """Bytes in one printed unit ``label`` ("MB", "Mb", "GB", "TB", "Tb", ...).

    SI reading by default: prefix 10^3k, ``B`` = byte, ``b`` = bit. ``binary=True`` reads the prefix as
    2^10k; ``b_is_bit`` overrides the case rule for the last letter.
    """
    if len(label) != 2 or label[0] not in "kKMGT" or label[1] not in "bB":
        raise ValueError(f"unknown unit label {label!r}: expected k/M/G/T followed by B or b")
    power = "kMGT".index(label[0].replace("K", "k")) + 1
    scale = float(2 ** (10 * power)) if binary else float(10 ** (3 * power))
    bit = (label[1] == "b") if b_is_bit is None else b_is_bit
    return scale / BITS_PER_BYTE if bit else scale
