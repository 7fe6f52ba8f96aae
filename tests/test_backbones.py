"""Backbone registry: every entry builds, gives the papers' feature size, and records its weights."""

from __future__ import annotations

import os

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


@pytest.mark.parametrize("name", list_backbones())
def test_the_checkpoint_url_is_torchvisions_own(name: str) -> None:
    """The registry names torchvision's IMAGENET1K_V1 files without importing torchvision (planning reads it);
    each must be the file torchvision itself would download."""
    import torchvision.models as tvm

    enum = tvm.get_model_weights(name)
    assert backbone_spec(name).torchvision_url == enum.IMAGENET1K_V1.url


def test_planning_a_build_imports_no_torch(tmp_path) -> None:
    """`snakemake -n` of the smoke target, closed-form and cost tables and the figures in one process:
    parsing the workflow, planning every cell and building the DAG import neither torch nor torchvision, and read
    each dataset split once. They cost about 8 s of every Snakemake start on a 2-core CPU, and CI starts Snakemake
    dozens of times (measured: `snakemake -n fedcof_table5` 19 s -> 9 s; `snakemake -n ci_tables` 41 s -> 17 s,
    where planning the pfl tables still imports torch, once). Fails when a module the rule files import, or the
    planning of these runners, imports torch at its top."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys\n"
        "import benchmark.data.registry as reg\n"
        "loads = []\n"
        "real = reg.load_dataset\n"
        "def counted(name, split, *a, **k):\n"
        "    loads.append((name, split))\n"
        "    return real(name, split, *a, **k)\n"
        "reg.load_dataset = counted\n"
        "from snakemake.cli import main\n"
        f"sys.argv = ['snakemake', '-n', '--cores', '1', '-s', {str(root / 'workflow' / 'Snakefile')!r},\n"
        f"            '--directory', {str(tmp_path)!r}, 'smoke', 'fedcof_table5', 'fedcof_table8', 'table2',\n"
        "            'figures', '--config', 'tier=ci']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "heavy = sorted(m for m in ('torch', 'torchvision') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "assert len(loads) == len(set(loads)), sorted(loads)\n"
        "print('planned', len(loads))\n"
    )
    env = {**os.environ, "FLB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, env=env,
                         timeout=600)  # fmt: skip
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]


@pytest.mark.parametrize("env", [{}, {"XDG_CACHE_HOME": "/x/cache"}, {"TORCH_HOME": "~/th"},
                                 {"TORCH_HOME": "/t/home", "XDG_CACHE_HOME": "/x/cache"}])  # fmt: skip
def test_the_hub_folder_is_torchs_without_importing_torch(env: dict, monkeypatch) -> None:
    """Planning asks whether a torchvision checkpoint is in torch's hub cache without importing torch: the folder
    it computes must be the one torch.hub.get_dir() gives under the same environment."""
    import sys

    for key in ("TORCH_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    want = torch.hub.get_dir()
    monkeypatch.delitem(sys.modules, "torch")  # the torch-free path
    assert str(wmod.torch_hub_dir()) == want
