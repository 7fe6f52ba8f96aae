"""Tests for benchmark.pfl.models: the fedbabu networks against the reference code (``models/Nets.py``,
``models/ResNet.py`` of jhoon-oh/FedBABU) and the paper's App. A.1 printouts.

The paper states no parameter counts; it prints the 3convNet and 4convNet (App. A.1), and the reference code
defines MobileNet (kuangliu/pytorch-cifar). So the counts are checked against those architectures, rebuilt
here independently of the module under test (the numbers are written out as well).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from benchmark.errors import ConfigError, UnknownNameError
from benchmark.pfl.algorithms import get_algorithm
from benchmark.pfl.models import build_model, list_pfl_models, pfl_model_info
from benchmark.pfl.parts import conv_block, is_head

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REGISTRY = ["3convnet", "4convnet", "mobilenet_cifar", "resnet18_cifar", "resnet50_cifar"]
BN_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


# ---------------------------------------------------------------- the reference networks, rebuilt inline
def _ref_conv3x3(cin: int, cout: int) -> nn.Module:  # models/Nets.py conv3x3
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout, track_running_stats=False),
                         nn.ReLU(), nn.MaxPool2d(2))  # fmt: skip


class _RefCNNCifar(
    nn.Module
):  # models/Nets.py CNNCifar (the paper's 4convNet; 3 blocks + 1 channel: 3convNet)
    def __init__(self, num_classes: int, depth: int = 4, cin: int = 3, feat: int = 64 * 2 * 2) -> None:
        super().__init__()
        self.features = nn.Sequential(*[_ref_conv3x3(cin if i == 0 else 64, 64) for i in range(depth)])
        self.linear = nn.Linear(feat, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x).flatten(1))


class _RefBlock(nn.Module):  # models/Nets.py Block
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin, track_running_stats=False)
        self.conv2 = nn.Conv2d(cin, cout, 1, 1, 0, bias=False)
        self.bn2 = nn.BatchNorm2d(cout, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class _RefMobileNetCifar(nn.Module):  # models/Nets.py MobileNetCifar
    cfg = (64, (128, 2), 128, (256, 2), 256, (512, 2), 512, 512, 512, 512, 512, (1024, 2), 1024)

    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(32, track_running_stats=False)
        layers, cin = [], 32
        for x in self.cfg:
            cout, stride = (x, 1) if isinstance(x, int) else x
            layers.append(_RefBlock(cin, cout, stride))
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.linear = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.avg_pool2d(self.layers(F.relu(self.bn1(self.conv1(x)))), 2)
        return self.linear(out.flatten(1))


def _count(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def _shapes(net: nn.Module) -> list[tuple[int, ...]]:
    return [tuple(v.shape) for v in net.state_dict().values()]


# ------------------------------------------------------------------------------------------------ tests
def test_registry_lists_the_papers_networks():
    assert list_pfl_models() == REGISTRY
    with pytest.raises(UnknownNameError, match="use one of"):
        pfl_model_info("vgg")


@pytest.mark.parametrize("name", REGISTRY)
def test_each_model_builds_for_its_input_size(name):
    info = pfl_model_info(name)
    torch.manual_seed(0)
    net = build_model(name, 7)
    x = torch.randn(3, info.in_channels, info.image_size, info.image_size)
    out = net.eval()(x)
    assert out.shape == (3, 7)
    assert net.features(x).shape == (3, net.linear.in_features)
    assert torch.equal(net.linear(net.features(x)), out)


@pytest.mark.parametrize("name", REGISTRY)
def test_head_is_exactly_the_linear_layer(name):
    net = build_model(name, 10)
    keys = list(net.state_dict())
    assert [k for k in keys if is_head(k)] == ["linear.weight", "linear.bias"]
    # fedbabu's body/head switch: FedBABU trains and aggregates every entry but the head
    babu = get_algorithm("fedbabu")
    assert [k for k in keys if babu.trains(k)] == [k for k in keys if not is_head(k)]
    assert not any(babu.aggregates(k) for k in ("linear.weight", "linear.bias"))


@pytest.mark.parametrize("name", REGISTRY)
def test_batch_bn_has_no_running_statistics_and_standard_bn_has(name):
    batch = build_model(name, 10, bn="batch").state_dict()
    standard = build_model(name, 10, bn="standard").state_dict()
    assert not [k for k in batch if k.endswith(BN_BUFFERS)]
    n_bn = sum(1 for k in standard if k.endswith("running_mean"))
    assert n_bn > 0 and sum(1 for k in standard if k.endswith(BN_BUFFERS)) == 3 * n_bn
    assert set(batch) == {k for k in standard if not k.endswith(BN_BUFFERS)}


def test_default_bn_follows_the_reference():
    """The reference's MobileNet and convNets use batch statistics; its ResNets standard BN."""
    defaults = {n: pfl_model_info(n).default_bn for n in REGISTRY}
    assert defaults == {"3convnet": "batch", "4convnet": "batch", "mobilenet_cifar": "batch",
                        "resnet18_cifar": "standard", "resnet50_cifar": "standard"}  # fmt: skip


def test_batch_bn_normalises_with_the_test_batch_in_eval():
    """track_running_stats=False: an image's output in eval() depends on the batch it is in."""
    torch.manual_seed(0)
    net = build_model("4convnet", 10).eval()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert not torch.allclose(net(x)[:2], net(x[:2]))
        std = build_model("4convnet", 10, bn="standard").eval()
        assert torch.allclose(std(x)[:2], std(x[:2]), atol=1e-5)


@pytest.mark.parametrize("name", ["4convnet", "mobilenet_cifar"])
def test_orthogonal_head_init_gives_orthonormal_rows(name):
    torch.manual_seed(0)
    w = build_model(name, 10, head_init="orthogonal").linear.weight.detach()
    assert torch.allclose(w @ w.T, torch.eye(10), atol=1e-5)
    torch.manual_seed(0)
    default = build_model(name, 10).linear.weight.detach()
    assert not torch.allclose(default @ default.T, torch.eye(10), atol=1e-2)


def test_bad_bn_and_head_init_are_config_errors():
    with pytest.raises(ConfigError, match="bn="):
        build_model("4convnet", 10, bn="group")
    with pytest.raises(ConfigError, match="head_init="):
        build_model("4convnet", 10, head_init="xavier")


def test_4convnet_is_the_papers_printout():
    """App. A.1's 4convNet (CIFAR-10): 115,658 parameters; the 3convNet (EMNIST, 62 classes): 110,654."""
    ours, ref = build_model("4convnet", 10), _RefCNNCifar(10)
    assert _count(ours) == _count(ref) == 115_658
    assert _shapes(ours) == _shapes(ref)
    three, ref3 = build_model("3convnet", 62), _RefCNNCifar(62, depth=3, cin=1, feat=576)
    assert _count(three) == _count(ref3) == 110_654
    assert _shapes(three) == _shapes(ref3)


def test_4convnet_computes_the_reference_function():
    torch.manual_seed(3)
    ref = _RefCNNCifar(10)
    ours = build_model("4convnet", 10)
    ours.load_state_dict(dict(zip(ours.state_dict(), ref.state_dict().values(), strict=True)))
    x = torch.randn(5, 3, 32, 32)
    assert torch.equal(ours(x), ref(x))


def test_mobilenet_cifar100_is_the_reference_network():
    """The reference MobileNetCifar with a CIFAR-100 head: 3,309,476 parameters, the same state names and
    shapes, the same initialisation for the same seed, and the same outputs."""
    torch.manual_seed(5)
    ref = _RefMobileNetCifar(100)
    torch.manual_seed(5)
    ours = build_model("mobilenet_cifar", 100)
    assert _count(ours) == _count(ref) == 3_309_476
    ref_sd, our_sd = ref.state_dict(), ours.state_dict()
    assert list(our_sd) == list(ref_sd)
    assert all(torch.equal(our_sd[k], ref_sd[k]) for k in ref_sd)
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(ours(x), ref(x))


@pytest.mark.parametrize(("name", "count10", "count100"),
                         [("resnet18_cifar", 11_173_962, 11_220_132), ("resnet50_cifar", 23_520_842, 23_705_252)])  # fmt: skip
def test_resnet_parameter_counts_are_the_reference(name, count10, count100):
    """kuangliu's CIFAR ResNet18/50 (the reference's models/ResNet.py): the well-known 10-class counts, and the
    100-class ones (the head grows by 90 rows)."""
    assert _count(build_model(name, 10)) == count10
    net = build_model(name, 100)
    assert _count(net) == count100 == count10 + 90 * (net.linear.in_features + 1)


def test_the_conv_blocks_of_fedbabu_app_f3_are_the_convnets_conv_and_batchnorm_pairs():
    """benchmark.pfl.parts numbers the 4convNet's body entries by block (conv + its BN); a change of the
    ConvNet's module layout must change CONVNET_BLOCK_MODULES with it."""
    net = build_model("4convnet", 10)
    got = [(type(m).__name__, conv_block(f"body.{i}.weight")) for i, m in enumerate(net.body)
           if isinstance(m, (nn.Conv2d, nn.BatchNorm2d))]  # fmt: skip
    assert got == [(kind, b) for b in range(1, 5) for kind in ("Conv2d", "BatchNorm2d")]
    assert conv_block("linear.weight") is None
