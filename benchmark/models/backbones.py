"""Backbones by name, timm-style: a registry of typed constructors with the papers' feature/head split.

Each entry builds a :class:`~benchmark.models.classifier.Classifier` whose ``body`` returns the feature
vector the papers' code uses (``shared/reference/papers-code.md`` §1.3, §2.3) and whose ``head`` is a
fresh ``nn.Linear(d, C)``:

===============  ====  ===================================================================================
name             d     body
===============  ====  ===================================================================================
squeezenet1_1    512   ``features`` -> global average pool (legate2023: the conv classifier is replaced by
                       ``AdaptiveAvgPool2d(1), Flatten, Linear``; no dropout)
resnet18         512   every child but ``fc`` (layer4 -> ReLU -> avgpool) -> flatten
mobilenet_v2     1280  ``features`` (ends in ReLU6) -> global average pool (fedcof; dropout removed)
vit_b_16         768   class token after the final LayerNorm (torchvision's ``heads`` removed). fedcof used
                       timm's ``vit_base_patch16_224.augreg_in21k``; torchvision's IMAGENET1K_V1 is a
                       different checkpoint (documented departure; no such weights exist here anyway).
===============  ====  ===================================================================================
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchmark.errors import ConfigError
from benchmark.models.weights import (
    SubstituteFile,
    WeightsIdentity,
    check_source,
    load_substitute,
    load_torchvision_checkpoint,
    random_identity,
)
from benchmark.registry import Registry

if TYPE_CHECKING:
    import torch
    from torch import nn

    from benchmark.models.classifier import Classifier

# torch and torchvision are imported when a backbone is built, never on import: the workflow's planning reads
# names, feature sizes, URLs and gammas from this registry, and importing torchvision (with torch) took 5 to 8 s
# of every Snakemake start and of every job process that needs no model (tests/test_backbones.py checks it).


def _tv_constructor(name: str) -> Callable[..., nn.Module]:
    return getattr(importlib.import_module("torchvision.models"), name)


@dataclass(frozen=True)
class BackboneSpec:
    """Registry entry: how to build the architecture, what feature size it gives and where weights come from."""

    name: str
    feature_dim: int
    build: Callable[[], nn.Module]  # architecture with torchvision default init
    wrap: Callable[[nn.Module], nn.Module]  # architecture -> body returning (B, d)
    torchvision_url: str
    state_prefix: str  # key prefix in a torchvision checkpoint that the body keeps ('' = whole net)
    substitute: SubstituteFile | None
    # FedCOF shrinkage gamma the fedcof code uses for this model (fedcof Sec. 5 "Implementation Details";
    # bash_for_testmethods): 1 for SqueezeNet and ViT-B/16, 0.1 for MobileNetV2. ResNet is not in the paper
    # text; the path-B code default ``--shrink 1.0`` applies to it. Read by closed_form.fedcof.default_gamma.
    default_gamma: float


#: The backbones by name (registered below with :func:`register_backbone`).
BACKBONES: Registry[BackboneSpec] = Registry("backbone")


def register_backbone(spec: BackboneSpec) -> BackboneSpec:
    return BACKBONES.add(spec.name, spec)


def list_backbones() -> list[str]:
    """Names of all registered backbones."""
    return BACKBONES.sorted_names()


def backbone_spec(name: str) -> BackboneSpec:
    """Registry entry of ``name``; unknown names raise :class:`UnknownNameError` listing the valid ones."""
    return BACKBONES.get(name)


def _pooled_features(net: nn.Module) -> nn.Module:
    from benchmark.models.wrappers import PooledFeatures

    return PooledFeatures(net.features)


def _headless(head: str) -> Callable[[nn.Module], nn.Module]:
    def wrap(net: nn.Module) -> nn.Module:
        from benchmark.models.wrappers import Headless

        return Headless(net, head)

    return wrap


def _torchvision_backbone(
    name: str, feature_dim: int, checkpoint: str, *, wrap: Callable[[nn.Module], nn.Module] = _pooled_features,
    substitute: SubstituteFile | None = None, default_gamma: float = 1.0,
) -> BackboneSpec:
    """Register torchvision's ``name`` (built with ``weights=None``; the papers' checkpoint is its
    ``IMAGENET1K_V1``, the file ``checkpoint`` under :data:`TORCHVISION_MODELS`, checked against torchvision's
    own enum by tests/test_backbones.py). The default body pools ``net.features``, the only part a checkpoint's
    ``features.`` keys fill; another ``wrap`` keeps the whole net."""
    return register_backbone(
        BackboneSpec(
            name=name,
            feature_dim=feature_dim,
            build=lambda: _tv_constructor(name)(weights=None),
            wrap=wrap,
            torchvision_url=TORCHVISION_MODELS + checkpoint,
            state_prefix="features." if wrap is _pooled_features else "",
            substitute=substitute,
            default_gamma=default_gamma,
        )
    )


#: Where torchvision's IMAGENET1K_V1 checkpoints are published.
TORCHVISION_MODELS = "https://download.pytorch.org/models/"

_torchvision_backbone(
    "squeezenet1_1", 512, "squeezenet1_1-b8a52dc0.pth",
    substitute=SubstituteFile(
        "squeezenet1_1-deepscale-caffe-v1.1-features.safetensors",
        "f2618aac86e5825c591b19d8935dadbb68b3dd3cf53ddfa163b47d3f48beb195",
        "features.",
        "DeepScale SqueezeNet v1.1 (Caffe), input convention folded into conv1; not torchvision's run",
    ),
)  # fmt: skip
_torchvision_backbone("resnet18", 512, "resnet18-f37072fd.pth", wrap=_headless("fc"))
_torchvision_backbone(
    "mobilenet_v2", 1280, "mobilenet_v2-b0353104.pth",
    substitute=SubstituteFile(
        "mobilenet_v2-tonylins-imagenet-features.safetensors",
        "9ffd08f7cdff46d4a60bc5640e3e35aa7ff2951f5a163b26334443c78bed8a27",
        "features.",
        "tonylins/pytorch-mobilenet-v2 ImageNet training, keys renamed; not torchvision's IMAGENET1K_V1",
    ),
    default_gamma=0.1,
)  # fmt: skip
_torchvision_backbone("vit_b_16", 768, "vit_b_16-c867db91.pth", wrap=_headless("heads"))


def _load_into(net: nn.Module, state: dict[str, torch.Tensor], prefix: str, origin: str) -> None:
    """Load the ``prefix`` part of ``state`` into ``net``; every kept key of the net must be present."""
    own = net.state_dict()
    wanted = {k for k in own if k.startswith(prefix)}
    given = {k: v for k, v in state.items() if k.startswith(prefix) and k in own}
    missing = sorted(wanted - set(given))
    if missing:
        raise ConfigError(
            f"weights {origin} lack {len(missing)} tensors the architecture needs (e.g. {missing[0]})",
            "check that the file belongs to this backbone",
        )
    bad = [k for k, v in given.items() if tuple(v.shape) != tuple(own[k].shape)]
    if bad:
        raise ConfigError(
            f"weights {origin}: shape mismatch for {bad[0]}", "check that the file belongs to this backbone"
        )
    net.load_state_dict(given, strict=False)


def create_backbone(
    name: str,
    weights: str = "substitute",
    *,
    num_classes: int = 1000,
    seed: int = 0,
    head_bias: bool = True,
    download: bool | None = None,
    weights_dir: str | None = None,
) -> tuple[Classifier, WeightsIdentity]:
    """Build ``name`` with ``weights`` (``torchvision`` | ``substitute`` | ``random``) and a fresh head.

    The architecture (and for ``random`` its weights) and the head are initialised from a torch generator
    seeded with ``seed`` (the model-init stream), so the same call gives bit-identical modules. The head is
    ``nn.Linear(d, num_classes, bias=head_bias)`` with PyTorch's default init (legate2023 code: bias=True;
    fedcof code: bias=False).
    """
    import torch
    from torch import nn

    from benchmark.models.classifier import Classifier

    spec = backbone_spec(name)
    check_source(weights)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = spec.build()
        head = nn.Linear(spec.feature_dim, num_classes, bias=head_bias)
    if weights == "torchvision":
        state, ident = load_torchvision_checkpoint(spec.torchvision_url, download)
        _load_into(net, state, spec.state_prefix, ident.name)
    elif weights == "substitute":
        if spec.substitute is None:
            raise ConfigError(
                f"backbone {name!r} has no substitute weights on this suite",
                "use weights: torchvision (needs the official checkpoint) or random",
            )
        state, ident = load_substitute(spec.substitute, weights_dir)
        _load_into(net, state, spec.substitute.key_prefix, ident.name)
    else:
        ident = random_identity(net, seed)
    body = spec.wrap(net)
    return Classifier(body, head), ident
