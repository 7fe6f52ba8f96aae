"""Backbone registry: every entry builds, gives the papers' feature size, and records its weights."""

from __future__ import annotations

import pytest
import torch

from benchmark.errors import ChecksumError, ConfigError, DataMissingError, UnknownNameError
from benchmark.models import weights as wmod
from benchmark.models.backbones import backbone_spec, create_backbone, list_backbones

EXPECTED_DIM = {"squeezenet1_1": 512, "resnet18": 512, "mobilenet_v2": 1280, "vit_b_16": 768}


def test_registry_lists_the_papers_backbones() -> None:
    assert set(list_backbones()) == set(EXPECTED_DIM)


@pytest.mark.parametrize("name", list_backbones())
def test_random_init_builds_with_feature_dim_and_is_seeded(name: str) -> None:
    model, ident = create_backbone(name, "random", num_classes=7, seed=3)
    model.eval()
    size = 224 if name == "vit_b_16" else 64
    with torch.inference_mode():
        f = model.body(torch.zeros(1, 3, size, size))
    assert f.shape == (1, EXPECTED_DIM[name]) == (1, backbone_spec(name).feature_dim)
    assert model.head.out_features == 7
    assert ident.source == "random" and len(ident.sha256) == 64
    _, ident2 = create_backbone(name, "random", num_classes=7, seed=3)
    assert ident2 == ident
    _, ident3 = create_backbone(name, "random", num_classes=7, seed=4)
    assert ident3.sha256 != ident.sha256


@pytest.mark.parametrize("name", [n for n in list_backbones() if backbone_spec(n).substitute is not None])
def test_substitute_weights_load_and_record_sha256(name: str, real_weights_dir) -> None:
    model, ident = create_backbone(name, "substitute", weights_dir=str(real_weights_dir))
    spec = backbone_spec(name)
    assert ident.sha256 == spec.substitute.sha256 and ident.substitute
    rand, _ = create_backbone(name, "random")
    # the loaded feature weights differ from a random init
    k = next(iter(model.body.state_dict()))
    assert not torch.equal(model.body.state_dict()[k], rand.body.state_dict()[k])


def test_substitute_checksum_mismatch_is_refused(tmp_path, real_weights_dir) -> None:
    spec = backbone_spec("squeezenet1_1").substitute
    bad = tmp_path / spec.filename
    data = bytearray((real_weights_dir / spec.filename).read_bytes())
    data[-1] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        create_backbone("squeezenet1_1", "substitute", weights_dir=str(tmp_path))


def test_substitute_missing_names_the_folder(tmp_path) -> None:
    with pytest.raises(DataMissingError, match=str(tmp_path)):
        create_backbone("mobilenet_v2", "substitute", weights_dir=str(tmp_path))


def test_no_substitute_for_resnet18() -> None:
    with pytest.raises(ConfigError, match="no substitute"):
        create_backbone("resnet18", "substitute")


def test_torchvision_weights_absent_offline(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    with pytest.raises(DataMissingError, match="torch hub cache"):
        create_backbone("resnet18", "torchvision", download=False)


def test_torchvision_hub_cache_file_is_checksummed_before_loading(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    path = wmod.hub_checkpoint_path(backbone_spec("resnet18").torchvision_url)
    path.parent.mkdir(parents=True)
    model, _ = create_backbone("resnet18", "random")
    torch.save(model.body.net.state_dict(), path)  # not torchvision's file: its hash prefix cannot match
    loads = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(1))
    with pytest.raises(ChecksumError, match="torchvision's file name says"):
        create_backbone("resnet18", "torchvision", download=False)
    assert loads == []


def test_torchvision_hub_cache_is_read_when_valid(tmp_path, monkeypatch) -> None:
    """A checkpoint whose sha256 matches its file name's prefix is loaded (weights_only) from the cache."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    model, _ = create_backbone("resnet18", "random", seed=5)
    blob = tmp_path / "blob.pth"
    torch.save(model.body.net.state_dict(), blob)
    from benchmark.io import sha256_file

    url = f"https://example.invalid/models/resnet18-{sha256_file(blob)[:8]}.pth"
    dest = wmod.hub_checkpoint_path(url)
    dest.parent.mkdir(parents=True)
    blob.rename(dest)
    state, ident = wmod.load_torchvision_checkpoint(url, download=False)
    assert ident.source == "torchvision" and ident.name == dest.name
    assert torch.equal(state["conv1.weight"], model.body.net.state_dict()["conv1.weight"])


def test_unknown_backbone_and_source() -> None:
    with pytest.raises(UnknownNameError, match="squeezenet1_1"):
        create_backbone("alexnet")
    with pytest.raises(ConfigError, match="weights source"):
        create_backbone("resnet18", "imagenet")
