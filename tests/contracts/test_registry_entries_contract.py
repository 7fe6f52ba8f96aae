"""Basic contract of every dataset, backbone and preprocessing preset entry (parametrised over the registries)."""

from __future__ import annotations

import inspect

import pytest

from benchmark.data.registry import DATASETS
from benchmark.features.preprocess import PRESETS, get_preprocess
from benchmark.models.backbones import BACKBONES


@pytest.mark.parametrize("name", DATASETS.names())
def test_dataset_entry(name: str) -> None:
    info = DATASETS.get(name)
    assert info.name == name and info.num_classes >= 2 and info.modality in ("image", "text")
    assert info.splits and len(set(info.splits)) == len(info.splits)
    assert info.expected_layout.strip() and info.source.strip()
    assert list(inspect.signature(info.loader).parameters)[:3] == ["root", "split", "download"]


@pytest.mark.parametrize("name", BACKBONES.names())
def test_backbone_entry(name: str) -> None:
    spec = BACKBONES.get(name)
    assert spec.name == name and spec.feature_dim > 0 and spec.default_gamma > 0
    assert spec.substitute is None or len(spec.substitute.sha256) == 64


@pytest.mark.parametrize("name", PRESETS.names())
def test_preset_entry(name: str) -> None:
    p = get_preprocess(name, flip_seed=3)
    assert p.name == name and len(p.mean) == len(p.std) == 3 and all(s > 0 for s in p.std)
    assert p.flip_seed == (3 if p.flip == "frozen" else PRESETS.get(name).flip_seed)
