"""MeZO's cost against plain inference and backprop fine-tuning, and one FedMeZO round, in one run.

Issue 13's performance questions (bernier2024 §4.1-4.2; Malladi et al. 2023 §2 and Fig. 3: MeZO "uses the same
memory as inference" and one step costs two forward passes), measured on the code the suite trains with
(:mod:`benchmark.zo.mezo`, :mod:`benchmark.zo.fedmezo`). Run from the repository root::

    python tools/mezo_bench.py --out results/bench/mezo                  # CPU: MiniLM (real weights)
    python tools/mezo_bench.py --out results/bench/mezo --quick          # about a minute on one CPU thread
    python tools/mezo_bench.py --out results/bench/mezo --device cuda    # GPU: RoBERTa-large shapes

It writes ``mezo_bench.json`` (the machine via :func:`benchmark.provenance.machine`, torch, threads, the git
commit, the model's identity and every number below) and ``mezo_bench.md`` (a summary table).

* **throughput** (per batch size of ``--batch-sizes`` sentences): ``forward2`` = two
  :func:`~benchmark.zo.text_model.mean_loss` passes over the batch (the forwards a MeZO step makes, nothing
  else) against one :func:`~benchmark.zo.mezo.mezo_step` with ``num_z=1``, ``restore="copy"`` and
  ``"inplace"``, timed **interleaved** (one of each per repeat, after one warm-up repeat; medians), so a busy
  machine slows all alike. ``ratio = forward2 / step`` (issue 13's target: ≥ 0.8). The overhead
  ``step − forward2`` is broken down from separately timed pieces: regenerating ``z`` (one ``randn`` per
  trainable parameter from a seeded generator), ``θ += c·z`` (regeneration + ``add_``), the snapshot
  (``clone``) and the copy back; a step with ``num_z=1`` makes 3 direction passes and one snapshot + 2 copies
  with ``restore="copy"`` (+εz, −εz, update), 4 direction passes with ``"inplace"`` (+εz, −2εz, +εz,
  update): :data:`STEP_WORK`, checked against the code by a test.
* **memory** (per batch size of ``--memory-batch-sizes``): every mode runs ``--memory-steps`` steps in a
  **fresh subprocess** (same model, same batch, saved to a file and loaded there): ``inference`` (two
  ``mean_loss`` passes), ``mezo_copy``, ``mezo_inplace`` (``mezo_step``, num_z=1), ``backprop_sgd`` and
  ``backprop_adamw`` (train mode, ``loss.backward()`` chunk by chunk, then one ``torch.optim`` step over every
  parameter MeZO perturbs). CPU: the peak RSS above the RSS after loading (Linux: glibc with a fixed mmap
  threshold so that RSS follows live memory, freed heap returned with ``malloc_trim``, then the peak reset
  through ``/proc/self/clear_refs`` and read as ``VmHWM``; elsewhere ``ru_maxrss``, which cannot be reset,
  said as ``peak_reset: false``); CUDA: also
  ``torch.cuda.max_memory_allocated`` above what was allocated before the first step.
* **fedmezo** (per k of ``--k-shots``): :func:`~benchmark.zo.fedmezo.run_fedmezo` on SST-2 split over
  ``--clients`` clients (:func:`benchmark.zo.data.prepare_task`, α = 100, k examples per class; each client
  evaluates its whole local set as one batch, bernier2024 §4.2.2, in chunks of ``--chunk``), ``ZOConfig(num_z=2)`` (§4.2.1), one warm-up
  round then ``--fed-rounds`` timed rounds; s/round and the projection to ``--total-rounds`` (2,621: Table
  4.1's round count), plus the time of one evaluation of the test split.

Models (``--encoder``, ``--weights``): ``all-minilm-l6-v2`` with its real weights (CPU default);
``roberta-large`` with random weights (``--device cuda`` default: :func:`benchmark.zo.encoders.random_encoder`;
right for throughput and memory, never for accuracy); ``tiny-bert`` (a small random ``BertModel``, tests).
Data (``--data``): ``sst2`` sentences of the training split (a seeded sample, tokenised with
``--max-length`` 128, padded to the longest of each chunk); an encoder without a tokenizer (random weights)
gets the same attention masks, lengths from the MiniLM WordPiece tokenizer, with random token ids of its own
vocabulary; ``synthetic`` (random ids and lengths; tests). ``--chunk`` is ``ZOConfig.chunk``: every forward
(inference, MeZO, backprop, evaluation) runs over length-sorted chunks of that many examples, each padded to
its longest (:meth:`TextTensors.chunks`). Nothing here asserts a time: this is a benchmark.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

try:
    import benchmark  # noqa: F401
except ModuleNotFoundError:  # a checkout without the package installed (a lent GPU machine): use it in place
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark.errors import ConfigError
from benchmark.io import atomic_write_json, atomic_write_text
from benchmark.provenance import git_commit, machine, package_versions
from benchmark.seeding import numpy_rng
from benchmark.timing import cuda_properties, peak_gib, reset_peak_memory, sync
from benchmark.zo.fedmezo import FedMeZOConfig, run_fedmezo
from benchmark.zo.mezo import ZOConfig, direction_seed, mezo_step, trainable_parameters
from benchmark.zo.text_model import DEFAULT_CHUNK, TextClassifier, TextTensors, accuracy, mean_loss

TARGET_RATIO = 0.8  # issue 13: one MeZO step (num_z=1) within 1/0.8 of two forward passes
TOTAL_ROUNDS = 2621  # bernier2024 Table 4.1: FedMeZO's rounds on SST-2 (benchmark/costs/NOTES.md)
TINY = "tiny-bert"
MEMORY_MODES = ("inference", "mezo_copy", "mezo_inplace", "backprop_sgd", "backprop_adamw")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
#: Work of one ``mezo_step`` with num_z = 1 besides its two forwards, per restore (mezo.projected_gradients and
#: apply_update_): direction passes (regenerate z, ``add_``), snapshots (clone) and copies back.
STEP_WORK = {
    "copy": {"directions": 3, "snapshots": 1, "copies": 2},
    "inplace": {"directions": 4, "snapshots": 0, "copies": 0},
}
#: glibc ``M_MMAP_THRESHOLD`` of the memory probes (bytes): blocks above it are mapped one by one.
MMAP_THRESHOLD = 1 << 16
ZO_LR = 1e-6  # the benchmarks' step size (any value times the same; MeZO's RoBERTa grid is 1e-7..1e-6)


# ------------------------------------------------------------------------------------------------ model
@dataclass(frozen=True)
class ModelSpec:
    """Which classifier to build: ``encoder`` (a :mod:`benchmark.zo.encoders` name or ``tiny-bert``),
    ``weights`` (``pretrained`` or ``random``), the head's classes, dtype, init seed, tiny-bert's vocabulary
    and hidden size."""

    encoder: str
    weights: str = "pretrained"
    classes: int = 2
    dtype: str = "float32"
    seed: int = 0
    tiny_vocab: int = 1000
    tiny_hidden: int = 32

    def __post_init__(self) -> None:
        if self.weights not in ("pretrained", "random"):
            raise ConfigError(f"--weights {self.weights!r}", "use 'pretrained' or 'random'")
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype!r}", f"use one of {sorted(DTYPES)}")
        if self.encoder == TINY and self.weights != "random":
            raise ConfigError("tiny-bert with --weights pretrained", "tiny-bert has random weights only")


@dataclass(frozen=True)
class Arch:
    """What the classifier around an encoder needs: hidden size, pooling, normalisation; the vocabulary and
    pad id (for re-tokening)."""

    hidden: int
    pooling: str
    normalize: bool
    vocab_size: int
    pad_token_id: int


def arch_of(spec: ModelSpec) -> Arch:
    if spec.encoder == TINY:
        return Arch(spec.tiny_hidden, "mean", True, spec.tiny_vocab, 0)
    from benchmark.zo.encoders import encoder_spec

    s = encoder_spec(spec.encoder)
    return Arch(s.hidden, s.pooling, s.normalize, s.vocab_size, s.pad_token_id)


def _tiny_encoder(spec: ModelSpec) -> torch.nn.Module:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=spec.tiny_vocab,
        hidden_size=spec.tiny_hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * spec.tiny_hidden,
        max_position_embeddings=128,
    )
    return BertModel(cfg)


@dataclass
class Built:
    """A built classifier (eval mode, on its device), its tokenizer (``None`` for random weights), its
    :class:`Arch` and what it is (``identity``: encoder, source, weights sha256, parameter counts)."""

    model: TextClassifier
    tokenizer: object | None
    arch: Arch
    identity: dict[str, Any]


@torch.no_grad()
def own_memory(model: torch.nn.Module) -> torch.nn.Module:
    """Give every parameter and buffer its own (anonymous) memory: transformers maps safetensors files, and
    the first write to a mapped parameter copies its pages (+1 model of resident memory at the first MeZO
    or optimiser step, none at inference), which would charge the loading to the method measured."""
    for module in model.modules():
        for param in module.parameters(recurse=False):
            param.data = param.data.clone()
        for name, buf in list(module.named_buffers(recurse=False)):
            module._buffers[name] = buf.clone()
    return model


def build_model(spec: ModelSpec, device: torch.device) -> Built:
    """The :class:`TextClassifier` of ``spec`` on ``device``: pretrained weights (verified load) or a seeded
    random init; the head has a seeded default init (its values do not change the cost)."""
    dtype = DTYPES[spec.dtype]
    arch = arch_of(spec)
    tokenizer = None
    if spec.encoder == TINY:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            encoder = _tiny_encoder(spec)
        source, digest = "random", "-"
    else:
        from benchmark.zo.encoders import load_encoder, random_encoder

        loaded = (
            load_encoder(spec.encoder, dtype=dtype)
            if spec.weights == "pretrained"
            else random_encoder(spec.encoder, seed=spec.seed, dtype=dtype)
        )
        encoder, tokenizer = loaded.model, loaded.tokenizer
        source, digest = loaded.identity.source, loaded.identity.weights_sha256
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed + 1)
        model = TextClassifier(encoder, arch.hidden, spec.classes, arch.pooling, arch.normalize)
    model = own_memory(model.to(device=device, dtype=dtype).eval())
    params = trainable_parameters(model)
    identity = {
        "encoder": spec.encoder,
        "weights": spec.weights,
        "source": source,
        "weights_sha256": digest,
        "dtype": spec.dtype,
        "pooling": arch.pooling,
        "trainable_params": sum(p.numel() for _, p in params),
        "trainable_mib": round(sum(p.numel() * p.element_size() for _, p in params) / 2**20, 2),
        "largest_param": max(p.numel() for _, p in params),
    }
    return Built(model, tokenizer, arch, identity)


def save_tensors(model: torch.nn.Module, path: str | Path) -> None:
    """Every parameter and buffer of ``model`` by name (CPU copies), for :func:`load_model`."""
    tensors = {n: t.detach().cpu() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    torch.save(tensors, path)


@torch.no_grad()
def load_model(spec: ModelSpec, path: str | Path, device: torch.device) -> TextClassifier:
    """``spec``'s classifier with the tensors :func:`save_tensors` wrote: the architecture is built on the meta
    device (no init), given fresh memory on ``device`` and filled by name, so a memory probe starts from
    the parent's exact weights in seconds (RoBERTa-large's random init takes far longer)."""
    arch = arch_of(spec)
    with torch.device("meta"):
        if spec.encoder == TINY:
            encoder = _tiny_encoder(spec)
        else:
            from benchmark.zo.encoders import meta_encoder

            encoder = meta_encoder(spec.encoder)
        model = TextClassifier(encoder, arch.hidden, spec.classes, arch.pooling, arch.normalize)
    model = model.to(DTYPES[spec.dtype]).to_empty(device=device)
    saved = torch.load(path, weights_only=True, mmap=True)
    targets = dict([*model.named_parameters(), *model.named_buffers()])
    if set(targets) != set(saved):
        raise ConfigError(
            f"{path} holds {sorted(set(saved) ^ set(targets))[:4]} that the {spec.encoder} classifier lacks / needs",
            "save the tensors of a model built from the same ModelSpec",
        )
    for name, t in targets.items():
        t.copy_(saved[name])
    del saved
    return model.eval()


# ------------------------------------------------------------------------------------------------ data
def minilm_tokenizer():
    """The all-MiniLM-L6-v2 WordPiece tokenizer from its verified local files (no model is loaded)."""
    from transformers import AutoTokenizer

    from benchmark.zo.encoders import encoder_entry

    folder, _, _ = encoder_entry("all-minilm-l6-v2").weights.locate(False)
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def retoken(data: TextTensors, vocab_size: int, pad_token_id: int, seed: int) -> TextTensors:
    """The same attention masks and labels with seeded random token ids in ``[4, vocab_size)`` (pad id on the
    padding): inputs of the right lengths for an encoder whose tokenizer is not available."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, vocab_size, tuple(data.input_ids.shape), generator=g)
    ids = torch.where(data.attention_mask.bool(), ids, torch.full_like(ids, pad_token_id))
    return TextTensors(ids, data.attention_mask.clone(), data.labels.clone())


def synthetic_data(n: int, vocab_size: int, seed: int, classes: int = 2, max_len: int = 40) -> TextTensors:
    """``n`` examples with random ids, lengths in [4, max_len] and labels (seeded)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(4, max_len + 1, (n,), generator=g)
    width = int(lengths.max()) if n else 1
    ids = torch.randint(4, vocab_size, (n, width), generator=g)
    mask = (torch.arange(width)[None, :] < lengths[:, None]).long()
    return TextTensors(ids * mask, mask, torch.randint(0, classes, (n,), generator=g))


def sst2_sample(n: int, seed: int, tokenizer, max_length: int, data_root: str | None = None) -> TextTensors:
    """``n`` sentences of SST-2's training split (seeded, without replacement), tokenised."""
    from benchmark.data.registry import load_dataset
    from benchmark.zo.text_model import tokenise

    train = load_dataset("sst2", "train", data_root)
    idx = numpy_rng(seed, "mezo-bench-batch").choice(len(train.labels), size=n, replace=False)
    labels = np.asarray(train.labels)[idx].tolist()
    return tokenise(tokenizer, [train.texts[i] for i in idx], labels, max_length)


def fit_inputs(data: TextTensors, built: Built, seed: int) -> TextTensors:
    """``data`` as ``built``'s model reads it: unchanged when the model has its tokenizer, else re-tokened."""
    return (
        data
        if built.tokenizer is not None
        else retoken(data, built.arch.vocab_size, built.arch.pad_token_id, seed)
    )


def padded_tokens(data: TextTensors, chunk: int) -> int:
    """Tokens a forward over ``data`` computes: its length-sorted chunks, each padded to its longest."""
    return int(sum(c.input_ids.numel() for c in data.chunks(chunk)))


def batch_facts(data: TextTensors, chunk: int) -> dict[str, Any]:
    """Sentences, real tokens, and tokens the forward computes (:func:`padded_tokens`)."""
    return {
        "sentences": len(data),
        "tokens": int(data.attention_mask.sum()),
        "padded_tokens": padded_tokens(data, chunk),
        "mean_length": round(float(data.lengths.float().mean()), 2),
    }


# ------------------------------------------------------------------------------------------------ throughput
def interleaved(
    fns: dict[str, Callable[[], object]], repeats: int, device: torch.device
) -> dict[str, list[float]]:
    """Seconds of each ``fn`` per repeat, the functions called in turn (one warm-up turn first)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for r in range(repeats + 1):
        for name, fn in fns.items():
            sync(device)
            t0 = time.perf_counter()
            fn()
            sync(device)
            if r > 0:
                times[name].append(time.perf_counter() - t0)
    return times


@torch.no_grad()
def regenerate_z(params, seed: int) -> None:
    """What each direction pass of :mod:`benchmark.zo.mezo` regenerates: one seeded ``randn`` per parameter."""
    gen = torch.Generator(device=params[0][1].device)
    gen.manual_seed(direction_seed(seed, 0))
    for _, p in params:
        torch.randn(p.shape, generator=gen, device=p.device, dtype=p.dtype)


def time_throughput(
    model: torch.nn.Module, batch: TextTensors, repeats: int, device: torch.device, chunk: int = DEFAULT_CHUNK
) -> dict[str, Any]:
    """Two forwards vs one MeZO step (num_z=1, both restores), interleaved, and the overhead's parts."""
    from benchmark.zo.mezo import add_direction_

    params = trainable_parameters(model)
    configs = {r: ZOConfig(lr=ZO_LR, num_z=1, restore=r, chunk=chunk) for r in STEP_WORK}
    seeds = iter(range(1, 10**9))
    saved = [p.detach().clone() for _, p in params]

    def snapshot() -> list[torch.Tensor]:
        return [p.detach().clone() for _, p in params]

    @torch.no_grad()
    def copy_back() -> None:
        for (_, p), s in zip(params, saved, strict=True):
            p.copy_(s)

    fns: dict[str, Callable[[], object]] = {
        "forward2": lambda: (mean_loss(model, batch, chunk), mean_loss(model, batch, chunk)),
        "step_copy": lambda: mezo_step(model, [batch], next(seeds), configs["copy"]),
        "step_inplace": lambda: mezo_step(model, [batch], next(seeds), configs["inplace"]),
    }
    times = interleaved(fns, repeats, device)
    parts = interleaved(
        {
            "z_regen": lambda: regenerate_z(params, 0),
            "direction": lambda: add_direction_(params, 0, 0, 0.0),
            "snapshot": snapshot,
            "copy_back": copy_back,
        },
        repeats,
        device,
    )
    med = {k: statistics.median(v) for k, v in {**times, **parts}.items()}
    out: dict[str, Any] = {
        **batch_facts(batch, chunk),
        "times_s": {k: [round(t, 5) for t in v] for k, v in {**times, **parts}.items()},
        "median_s": {k: round(v, 5) for k, v in med.items()},
        "min_s": {k: round(min(v), 5) for k, v in {**times, **parts}.items()},
        "sentences_per_s_forward": round(len(batch) / (med["forward2"] / 2), 1),
    }
    for restore, work in STEP_WORK.items():
        step = med[f"step_{restore}"]
        overhead = step - med["forward2"]
        pieces = {
            "z_regen": work["directions"] * med["z_regen"],
            "add": work["directions"] * (med["direction"] - med["z_regen"]),
            "snapshot_and_copies": work["snapshots"] * med["snapshot"] + work["copies"] * med["copy_back"],
        }
        pieces["rest"] = overhead - sum(pieces.values())
        out[restore] = {
            "ratio": round(med["forward2"] / step, 4),
            "step_s": round(step, 5),
            "overhead_s": round(overhead, 5),
            "overhead_parts_s": {k: round(v, 5) for k, v in pieces.items()},
            "work": work,
        }
    return out


# ------------------------------------------------------------------------------------------------ memory
def _rss_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _trim_heap() -> bool:
    """Give freed heap memory back to the OS (glibc ``malloc_trim``), so the baseline RSS is live memory."""
    name = ctypes.util.find_library("c")
    try:
        return bool(ctypes.CDLL(name).malloc_trim(0)) if name else False
    except (OSError, AttributeError):
        return False


def _reset_peak_rss() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux >= 4.0: reset VmHWM to the current RSS
        return True
    except OSError:
        return False


def _step_fn(mode: str, model: torch.nn.Module, batch: TextTensors, chunk: int) -> Callable[[int], object]:
    """One step of ``mode`` on ``batch``, forwards in the same length-sorted chunks of ``chunk`` examples
    (backprop accumulates the chunks' gradients: the same batch and the same forwards as MeZO's)."""
    if mode == "inference":
        return lambda s: (mean_loss(model, batch, chunk), mean_loss(model, batch, chunk))
    if mode.startswith("mezo_"):
        zo = ZOConfig(lr=ZO_LR, num_z=1, restore=mode.removeprefix("mezo_"), chunk=chunk)
        return lambda s: mezo_step(model, [batch], s, zo)
    params = [p for _, p in trainable_parameters(model)]
    opt = (
        torch.optim.SGD(params, lr=1e-5)
        if mode == "backprop_sgd"
        else torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0)
    )
    parts = batch.chunks(chunk)

    def step(_s: int) -> None:
        model.train()
        opt.zero_grad(set_to_none=True)
        for part in parts:
            logits = model(part.input_ids, part.attention_mask)
            loss = torch.nn.functional.cross_entropy(logits.float(), part.labels, reduction="sum") / len(
                batch
            )
            loss.backward()
        opt.step()

    return step


@dataclass(frozen=True)
class Probe:
    """One memory measurement, run by a fresh process (``--probe`` JSON): the model's spec and tensors
    (:func:`save_tensors`), the batch file, the mode, device, steps and torch threads."""

    spec: ModelSpec
    model_file: str
    batch_file: str
    mode: str
    device: str
    steps: int = 2
    threads: int | None = None
    chunk: int = DEFAULT_CHUNK

    def __post_init__(self) -> None:
        if self.mode not in MEMORY_MODES:
            raise ConfigError(f"memory mode {self.mode!r}", f"use one of {MEMORY_MODES}")

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Probe:
        raw = json.loads(text)
        return cls(**{**raw, "spec": ModelSpec(**raw["spec"])})


def memory_probe(probe: Probe) -> dict[str, Any]:
    """In this (fresh) process: load the model and the batch, then the peak memory of ``probe.steps`` steps
    of ``probe.mode`` above what was resident (CPU) / allocated (CUDA) before the first."""
    if probe.threads:
        torch.set_num_threads(probe.threads)
    dev = torch.device(probe.device)
    model = load_model(probe.spec, probe.model_file, dev)
    batch = TextTensors(**torch.load(probe.batch_file, weights_only=True)).to(dev)
    fn = _step_fn(probe.mode, model, batch, probe.chunk)
    trimmed = _trim_heap()
    base_kib = _rss_kib("VmRSS")
    reset = base_kib is not None and _reset_peak_rss()
    if not reset:
        base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sync(dev)
    cuda_base = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else None
    reset_peak_memory(dev)
    t0 = time.perf_counter()
    for s in range(probe.steps):
        fn(s + 1)
    sync(dev)
    wall = time.perf_counter() - t0
    peak_kib = _rss_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out = {
        "mode": probe.mode,
        "steps": probe.steps,
        "peak_reset": reset,
        "heap_trimmed": trimmed,
        "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        "rss_baseline_mib": round(base_kib / 1024, 1),
        "rss_peak_mib": round(peak_kib / 1024, 1),
        "rss_increase_mib": round((peak_kib - base_kib) / 1024, 1),
        "cuda_baseline_gib": None,
        "cuda_peak_gib": peak_gib(dev),
        "cuda_increase_gib": None,
        "steps_wall_s": round(wall, 3),
    }
    if cuda_base is not None:
        out["cuda_baseline_gib"] = round(cuda_base / 2**30, 3)
        out["cuda_increase_gib"] = round((torch.cuda.max_memory_allocated(dev) - cuda_base) / 2**30, 3)
    return out


def run_probe(probe: Probe, timeout: float = 900.0) -> dict[str, Any]:
    """:func:`memory_probe` in a fresh Python process (this script with ``--probe``): ``status`` ok, oom or
    error (with the end of its stderr). glibc's malloc runs with a fixed mmap threshold
    (:data:`MMAP_THRESHOLD`): every block above it is mapped and unmapped on its own, so the peak RSS follows
    the peak of live memory instead of the allocation history (with the default dynamic threshold, blocks
    up to 32 MiB come from the heap once a large one has been freed, and the heap's reuse and fragmentation
    moved one mode's peak by ±100 MiB against another's on MiniLM at batch 256)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--probe", probe.to_json()]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD)}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"mode": probe.mode, "status": "timeout", "timeout_s": timeout}
    if proc.returncode != 0:
        oom = "OutOfMemoryError" in proc.stderr or proc.returncode in (-9, 137)
        return {
            "mode": probe.mode,
            "status": "oom" if oom else "error",
            "rc": proc.returncode,
            "stderr_tail": proc.stderr[-2000:],
        }
    return {"status": "ok", **json.loads(proc.stdout.strip().splitlines()[-1])}


def measure_memory(
    spec: ModelSpec,
    model: torch.nn.Module,
    batch: TextTensors,
    modes: Sequence[str],
    device: torch.device,
    steps: int = 2,
    threads: int | None = None,
    chunk: int = DEFAULT_CHUNK,
) -> dict[str, Any]:
    """Every mode of ``modes`` in its own fresh process, on ``model``'s weights and ``batch``; each increase
    also relative to ``inference``'s where that ran."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="mezo-bench-") as tmp:
        model_file, batch_file = Path(tmp) / "model.pt", Path(tmp) / "batch.pt"
        save_tensors(model, model_file)
        torch.save(
            {k: getattr(batch, k).cpu() for k in ("input_ids", "attention_mask", "labels")}, batch_file
        )
        for mode in modes:
            results[mode] = run_probe(
                Probe(spec, str(model_file), str(batch_file), mode, str(device), steps, threads, chunk)
            )
    key = "cuda_increase_gib" if device.type == "cuda" else "rss_increase_mib"
    ref = results.get("inference", {})
    for r in results.values():
        if r.get("status") == "ok" and ref.get("status") == "ok" and ref[key]:
            r["increase_vs_inference"] = round(r[key] / ref[key], 3)
    return {**batch_facts(batch, chunk), "measure": key, "modes": results}


# ------------------------------------------------------------------------------------------------ fedmezo
def time_fedmezo(
    model: torch.nn.Module,
    clients: Sequence[TextTensors],
    rounds: int,
    device: torch.device,
    test: TextTensors | None = None,
    total_rounds: int = TOTAL_ROUNDS,
    num_z: int = 2,
    chunk: int = DEFAULT_CHUNK,
) -> dict[str, Any]:
    """One warm-up + ``rounds`` timed FedMeZO rounds (shared clients, size-weighted, ``num_z``); the time of
    one evaluation of ``test``; the projection to ``total_rounds`` rounds (training only)."""
    zo = ZOConfig(lr=ZO_LR, num_z=num_z, chunk=chunk)
    stamps: list[float] = []

    def stamp(_done: int) -> None:
        sync(device)
        stamps.append(time.perf_counter())

    sync(device)
    start = time.perf_counter()
    run_fedmezo(model, clients, FedMeZOConfig(zo=zo, rounds=rounds + 1, seed=0), on_round_end=stamp)
    round_s = np.diff([start, *stamps])[1:].tolist()
    mean = sum(round_s) / len(round_s)
    out: dict[str, Any] = {
        "clients": len(clients),
        "client_sizes": [len(c) for c in clients],
        "examples": sum(len(c) for c in clients),
        "tokens": sum(int(c.attention_mask.sum()) for c in clients),
        "num_z": num_z,
        "chunk": chunk,
        "padded_tokens": sum(padded_tokens(c, chunk) for c in clients),
        "warmup_round_s": round(stamps[0] - start, 4),
        "round_s": [round(t, 4) for t in round_s],
        "mean_round_s": round(mean, 4),
        "total_rounds": total_rounds,
        "projected_hours": round(mean * total_rounds / 3600, 3),
    }
    if test is not None:
        sync(device)
        t0 = time.perf_counter()
        accuracy(model, test, chunk)
        sync(device)
        out.update(test_examples=len(test), eval_s=round(time.perf_counter() - t0, 4))
    return out


# ------------------------------------------------------------------------------------------------ report
def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    info.update(cuda_properties(device))
    if device.type == "cuda":
        info["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    return info


def _loadavg() -> list[float] | None:
    """1, 5 and 15 minute load averages (how busy the machine was: other processes share its cores)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def resolve_device(name: str) -> torch.device:
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"--device {name}: torch.cuda.is_available() is False here",
            "run on a machine with a GPU, or use --device cpu",
        )
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"--device {name}", "use cpu or cuda")
    return device


def summary(doc: dict[str, Any]) -> str:
    """The JSON's headline numbers as markdown."""
    m = doc["model"]
    lines = [
        f"# MeZO benchmark ({doc['device']['device']}, {doc['device']['torch_threads']} torch threads, "
        f"forwards in chunks of {doc['config']['chunk']})",
        "",
        f"Machine: {doc['machine']}; torch {doc['torch']}; commit {doc['git_commit']}; load average "
        f"{doc['load_average']['start']} at the start, {doc['load_average']['end']} at the end.",
        f"Model: {m['encoder']} ({m['weights']} weights, {m['trainable_params']:,} trainable parameters, "
        f"{m['trainable_mib']} MiB, {m['dtype']}); data: {doc['data']['source']}.",
        "",
    ]
    if doc["throughput"]:
        lines += [
            "## Throughput: two forwards vs one MeZO step (num_z = 1), medians",
            "",
            "| batch | tokens | 2 forwards (s) | step copy (s) | ratio copy | step inplace (s) | ratio inplace "
            "| z regen (s) | θ += c·z (s) | overhead copy: z / add / copies / rest (s) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for t in doc["throughput"]:
            med, c, i = t["median_s"], t["copy"], t["inplace"]
            parts = " / ".join(f"{v:.3f}" for v in c["overhead_parts_s"].values())
            lines.append(
                f"| {t['sentences']} | {t['padded_tokens']} | {med['forward2']:.3f} | {c['step_s']:.3f} | "
                f"{c['ratio']:.2f} | {i['step_s']:.3f} | {i['ratio']:.2f} | {med['z_regen']:.3f} | "
                f"{med['direction']:.3f} | {parts} |"
            )
        lines += ["", f"Target: ratio ≥ {doc['target']['forward2_over_step']}.", ""]
    if doc["memory"]:
        key = doc["memory"][0]["measure"]
        unit = "GiB (CUDA max_memory_allocated)" if key.startswith("cuda") else "MiB (peak RSS)"
        lines += [
            f"## Peak memory above the loaded model, {unit}",
            "",
            "| batch | " + " | ".join(MEMORY_MODES) + " |",
            "|---|" + "---|" * len(MEMORY_MODES),
        ]
        for mem in doc["memory"]:
            cells = []
            for mode in MEMORY_MODES:
                r = mem["modes"].get(mode)
                cells.append("-" if r is None else r["status"] if r["status"] != "ok" else f"{r[key]}")
            lines.append(f"| {mem['sentences']} | " + " | ".join(cells) + " |")
        lines.append("")
    if doc["fedmezo"]:
        lines += [
            "## One FedMeZO round (num_z = 2, every client's whole set as one batch)",
            "",
            "| k per class | clients | examples | s/round | projected h for "
            f"{TOTAL_ROUNDS:,} rounds | eval s |",
            "|---|---|---|---|---|---|",
        ]
        for f in doc["fedmezo"]:
            lines.append(
                f"| {f['k_shot']} | {f['clients']} | {f['examples']} | {f['mean_round_s']:.2f} | "
                f"{f['projected_hours']:.2f} | {f.get('eval_s', '-')} |"
            )
    return "\n".join(lines) + "\n"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python tools/mezo_bench.py", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for mezo_bench.json and mezo_bench.md")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--quick", action="store_true", help="small sizes (about a minute on one CPU thread)")
    ap.add_argument("--encoder", default=None, help="default: all-minilm-l6-v2 (cpu), roberta-large (cuda)")
    ap.add_argument("--weights", default=None, help="pretrained | random (default: pretrained for MiniLM)")
    ap.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    ap.add_argument("--data", default="sst2", choices=("sst2", "synthetic"))
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--chunk", type=int, default=DEFAULT_CHUNK, help="examples per forward (ZOConfig.chunk)")
    ap.add_argument("--parts", default="throughput,memory,fedmezo")
    ap.add_argument("--batch-sizes", default=None, help="throughput batches (default 16,64,256; quick 16,64)")
    ap.add_argument("--memory-batch-sizes", default=None, help="default 16,64,256 (quick 16)")
    ap.add_argument("--memory-modes", default=",".join(MEMORY_MODES))
    ap.add_argument("--memory-steps", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per mode (default 5; quick 2)")
    ap.add_argument("--k-shots", default=None, help="FedMeZO k per class (default 16,512; quick 16)")
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--fed-rounds", type=int, default=None, help="timed rounds (default 2; quick 1)")
    ap.add_argument(
        "--test-limit", type=int, default=None, help="test sentences evaluated (default all; quick 256)"
    )
    ap.add_argument("--total-rounds", type=int, default=TOTAL_ROUNDS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # internal: one memory measurement
    args = ap.parse_args(argv)
    if args.probe is None and not args.out:
        ap.error("--out is required")
    quick = args.quick
    cuda = args.device.startswith("cuda")
    args.encoder = args.encoder or ("roberta-large" if cuda else "all-minilm-l6-v2")
    args.weights = args.weights or ("pretrained" if args.encoder == "all-minilm-l6-v2" else "random")
    args.batch_sizes = _ints(args.batch_sizes or ("16,64" if quick else "16,64,256"))
    args.memory_batch_sizes = _ints(args.memory_batch_sizes or ("16" if quick else "16,64,256"))
    args.repeats = args.repeats or (2 if quick else 5)
    args.k_shots = _ints(args.k_shots or ("16" if quick else "16,512"))
    args.fed_rounds = args.fed_rounds or (1 if quick else 2)
    args.test_limit = args.test_limit if args.test_limit is not None else (256 if quick else None)
    args.parts = [p for p in args.parts.split(",") if p]
    args.memory_modes = [m for m in args.memory_modes.split(",") if m]
    if not set(args.parts) <= {"throughput", "memory", "fedmezo"}:
        ap.error(f"--parts must be among throughput, memory, fedmezo; got {args.parts}")
    if not set(args.memory_modes) <= set(MEMORY_MODES):
        ap.error(f"--memory-modes must be among {MEMORY_MODES}; got {args.memory_modes}")
    for name in ("repeats", "fed_rounds", "memory_steps", "clients", "chunk"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/mezo_bench.py`` (module docstring)."""
    args = parse_args(argv)
    if args.probe is not None:
        print(json.dumps(memory_probe(Probe.from_json(args.probe))))
        return 0
    device = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    spec = ModelSpec(args.encoder, args.weights, dtype=args.dtype, seed=args.seed)
    t_start, load_start = time.perf_counter(), _loadavg()
    built = build_model(spec, device)
    if args.data == "sst2":
        tokenizer = built.tokenizer or minilm_tokenizer()
        pool = sst2_sample(
            max([*args.batch_sizes, *args.memory_batch_sizes]), args.seed, tokenizer, args.max_length
        )
        data_desc = f"SST-2 train sentences (seeded sample), max_length {args.max_length}" + (
            "" if built.tokenizer else ", MiniLM WordPiece lengths, random token ids"
        )
    else:
        tokenizer = None
        pool = synthetic_data(
            max([*args.batch_sizes, *args.memory_batch_sizes]), built.arch.vocab_size, args.seed
        )
        data_desc = "synthetic (random ids, lengths 4..40)"
    pool = fit_inputs(pool, built, args.seed)
    throughput, memory, fed = [], [], []
    if "throughput" in args.parts:
        for n in args.batch_sizes:
            rec = time_throughput(
                built.model, pool.subset(torch.arange(n)).to(device), args.repeats, device, args.chunk
            )
            print(
                json.dumps(
                    {
                        "throughput": n,
                        "forward2_s": rec["median_s"]["forward2"],
                        "ratio_copy": rec["copy"]["ratio"],
                        "ratio_inplace": rec["inplace"]["ratio"],
                    }
                ),
                flush=True,
            )
            throughput.append(rec)
    if "memory" in args.parts:
        for n in args.memory_batch_sizes:
            rec = measure_memory(
                spec,
                built.model,
                pool.subset(torch.arange(n)),
                args.memory_modes,
                device,
                args.memory_steps,
                args.threads,
                args.chunk,
            )
            print(
                json.dumps(
                    {"memory": n, **{m: r.get(rec["measure"], r["status"]) for m, r in rec["modes"].items()}}
                ),
                flush=True,
            )
            memory.append(rec)
    if "fedmezo" in args.parts:
        for k in args.k_shots:
            if args.data == "sst2":
                from benchmark.zo.data import prepare_task

                task = prepare_task(
                    "sst2",
                    tokenizer,
                    clients=args.clients,
                    k_shot=k,
                    seed=args.seed,
                    max_length=args.max_length,
                    test_limit=args.test_limit,
                )
                clients = [fit_inputs(c, built, args.seed + 1 + i) for i, c in enumerate(task.clients)]
                test, identity = fit_inputs(task.test, built, args.seed), task.identity
            else:
                per = max(1, 2 * k // args.clients)
                clients = [
                    synthetic_data(per, built.arch.vocab_size, args.seed + 1 + i) for i in range(args.clients)
                ]
                test = synthetic_data(args.test_limit or 64, built.arch.vocab_size, args.seed + 100)
                identity = {"k_shot": k, "clients": args.clients}
            rec = time_fedmezo(
                built.model,
                [c.to(device) for c in clients],
                args.fed_rounds,
                device,
                test.to(device),
                args.total_rounds,
                chunk=args.chunk,
            )
            rec.update(k_shot=k, task=identity)
            print(
                json.dumps(
                    {
                        "fedmezo_k": k,
                        "mean_round_s": rec["mean_round_s"],
                        "projected_hours": rec["projected_hours"],
                    }
                ),
                flush=True,
            )
            fed.append(rec)
    doc = {
        "what": "MeZO step vs two forwards, peak memory of MeZO vs inference and backprop, one FedMeZO round "
        "(tools/mezo_bench.py; benchmark.zo.mezo / fedmezo)",
        "machine": machine(),
        "torch": torch.__version__,
        "versions": package_versions(),
        "git_commit": git_commit(),
        "device": device_info(device),
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "probe")},
        "model": built.identity,
        "data": {"source": data_desc, "pool": batch_facts(pool, args.chunk)},
        "zo": {"lr": ZO_LR, "eps": ZOConfig(lr=ZO_LR).eps, "step_work": STEP_WORK},
        "target": {"forward2_over_step": TARGET_RATIO},
        "throughput": throughput,
        "memory": memory,
        "fedmezo": fed,
        "wall_s": round(time.perf_counter() - t_start, 1),
        "load_average": {"start": load_start, "end": _loadavg()},
    }
    out = Path(args.out)
    atomic_write_json(out / "mezo_bench.json", doc)
    atomic_write_text(out / "mezo_bench.md", summary(doc))
    print(summary(doc))
    print(f"wrote {out / 'mezo_bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
