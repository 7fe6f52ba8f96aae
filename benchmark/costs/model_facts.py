"""Parameter counts and dataset facts that the cost model multiplies.

Parameter counts come from the torchvision constructors, built on the ``meta`` device (no memory, no
weights), with the head replaced the way the papers' code does (``shared/reference/papers-code.md`` §1.3,
§2.3):

=============  =========================================================  ===================================
backbone       feature extractor = ...                                    head
=============  =========================================================  ===================================
squeezenet1_1  ``features`` (the whole conv classifier is dropped)        ``Linear(d, C)`` after pool+flatten
resnet18       every module but ``fc``                                    ``fc = Linear(d, C)``
mobilenet_v2   ``features`` (classifier -> Identity, Identity)            ``Linear(d, C)``
vit_b_16       every module but ``heads``                                 ``Linear(d, C)``
=============  =========================================================  ===================================

legate2023's code gives the head a bias, fedcof's code does not (``HEAD_BIAS``). fedcof's ViT is timm's
``vit_base_patch16_224`` (in21k); its parameter count without head equals torchvision's ``vit_b_16``
(85,798,656) since the architecture is the same.

The backbone facts (``d``, the architecture, the part kept as feature extractor) are the backbone registry's
(:class:`benchmark.models.backbones.BackboneSpec`: ``feature_dim``, ``build`` and ``wrap``); this module only
counts and multiplies them. The dataset facts below are the papers' stated ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from benchmark.errors import ConfigError
from benchmark.models.backbones import backbone_spec
from benchmark.registry import lookup

# Whether each paper's code builds the linear head with a bias (papers-code.md §1.3 and §2.3).
HEAD_BIAS: dict[str, bool] = {"legate2023": True, "fedcof": False}


@dataclass(frozen=True)
class ParamCount:
    """Parameters of ``backbone`` with a ``num_classes``-way linear head, split into extractor and head."""

    backbone: str
    num_classes: int
    feature_dim: int
    feature_extractor: int
    head_weight: int
    head_bias: int

    @property
    def head(self) -> int:
        return self.head_weight + self.head_bias

    @property
    def total(self) -> int:
        return self.feature_extractor + self.head


def feature_dim(backbone: str) -> int:
    """``d``, the feature size of ``backbone`` (the registry's ``BackboneSpec.feature_dim``)."""
    return backbone_spec(backbone).feature_dim


@cache
def feature_extractor_params(backbone: str) -> int:
    """Number of parameters of ``backbone``'s feature extractor (everything the papers keep but the head):
    the registry's body (``BackboneSpec.wrap`` of ``BackboneSpec.build``), built on the ``meta`` device."""
    import torch  # local: planning reads this module's facts without torch (tests/test_backbones.py)

    spec = backbone_spec(backbone)
    with torch.device("meta"):
        kept = spec.wrap(spec.build())
    return int(sum(p.numel() for p in kept.parameters()))


def param_count(backbone: str, num_classes: int, *, head_bias: bool) -> ParamCount:
    """Feature-extractor and head parameter counts of ``backbone`` with a ``num_classes``-way head.

    The head is ``nn.Linear(d, num_classes, bias=head_bias)``: ``d * C`` weights plus ``C`` biases if any.
    """
    if num_classes < 1:
        raise ConfigError(f"num_classes must be >= 1, got {num_classes}", "pass the dataset's class count")
    d = feature_dim(backbone)
    return ParamCount(
        backbone=backbone,
        num_classes=num_classes,
        feature_dim=d,
        feature_extractor=feature_extractor_params(backbone),
        head_weight=d * num_classes,
        head_bias=num_classes if head_bias else 0,
    )


@dataclass(frozen=True)
class DatasetFacts:
    """Class count and training-set size as a paper states them (``None`` where the paper gives none)."""

    name: str
    num_classes: int
    num_train: int | None
    num_clients: int
    source: str


DATASETS: dict[str, DatasetFacts] = {
    f.name: f
    for f in (
        # legate2023 Table 1; 100 clients (§4).
        DatasetFacts("cifar10", 10, 50_000, 100, "legate2023 Table 1"),
        DatasetFacts("flowers102", 102, 1_020, 100, "legate2023 Table 1"),
        DatasetFacts("stanford_cars", 196, 8_144, 100, "legate2023 Table 1; fedcof App. H"),
        DatasetFacts("cub200", 200, 5_994, 100, "legate2023 Table 1; fedcof App. H"),
        DatasetFacts("eurosat_sub", 10, 5_000, 100, "legate2023 Table 1"),
        # fedcof §5 and App. H.
        DatasetFacts("cifar100", 100, 50_000, 100, "fedcof App. H"),
        DatasetFacts(
            "imagenet_r", 200, None, 100, "fedcof App. H (30k images in all; train split not given)"
        ),
        DatasetFacts(
            "inat_120k", 1203, 120_000, 9275, "fedcof §5, App. H ('120k training images', 9275 users)"
        ),
        DatasetFacts("domainnet10", 10, None, 6, "fedcof App. F (top-10 classes, 6 single-domain clients)"),
    )
}


def dataset_facts(name: str) -> DatasetFacts:
    """The stated facts of dataset ``name``."""
    return lookup(DATASETS, name, f"unknown dataset {name!r}")
