"""The networks of fedbabu (reference code ``models/Nets.py``, ``models/ResNet.py``), in a registry.

* ``mobilenet_cifar`` -- MobileNet v1 for 32 px inputs (kuangliu/pytorch-cifar; fedbabu footnote 10): conv3x3
  3->32, 13 depthwise-separable blocks ``[64,(128,2),128,(256,2),256,(512,2),512x5,(1024,2),1024]`` without
  biases, ``avg_pool2d(2)`` -> 1024-d, ``linear`` head with bias.
* ``4convnet`` -- CIFAR-10: four [conv3x3(64) + BN + ReLU + maxpool2] blocks -> 256-d, ``linear`` head.
* ``3convnet`` -- EMNIST (28 px, 1 channel): three such blocks -> 64*3*3-d (the paper's App. Table 19 network;
  the reference repository has no EMNIST model, so this is the 4convNet's block with three of them).
* ``resnet18_cifar`` / ``resnet50_cifar`` -- the CIFAR ResNets (3x3 stem, no max-pool, ``avg_pool2d(4)``).

BatchNorm: the reference's MobileNet and convNets use ``track_running_stats=False``, so BN normalises with the
statistics of the batch at hand even in ``eval()`` (a client's test batch of up to 128 images is normalised by
its own statistics). That is the default here (``bn="batch"``); ``bn="standard"`` gives the usual running
statistics. The ResNets use standard BN in the reference (running statistics are then averaged like every
other state entry) and default to it here.

"Body" is every state entry whose name does not contain ``linear`` (the reference's test,
:func:`benchmark.pfl.parts.is_head`); the head is the ``linear`` layer. Head initialisation is PyTorch's default (``head_init="default"``, He-uniform), or
orthogonal rows (``head_init="orthogonal"``, ``nn.init.orthogonal_``), or the "similar" rows of fedbabu App. B
(Table 24 'X': uniform on [0.45, 0.55], each row normalised to unit length).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.errors import ConfigError
from benchmark.registry import Registry


@dataclass(frozen=True)
class PFLModelInfo:
    name: str
    build: Callable[[int, str], nn.Module]
    default_bn: str
    in_channels: int
    image_size: int


#: The papers' networks by name (:class:`benchmark.registry.Registry`: unknown names list the known ones).
PFL_MODELS: Registry[PFLModelInfo] = Registry("personalised-FL model")


def register_pfl_model(name: str, *, default_bn: str = "batch", in_channels: int = 3, image_size: int = 32):
    """Decorator: ``build(num_classes, bn) -> nn.Module`` becomes the model ``name``."""

    def deco(fn: Callable[[int, str], nn.Module]) -> Callable[[int, str], nn.Module]:
        PFL_MODELS.add(name, PFLModelInfo(name, fn, default_bn, in_channels, image_size))
        return fn

    return deco


def list_pfl_models() -> list[str]:
    """The registered model names, sorted."""
    return PFL_MODELS.sorted_names()


def pfl_model_info(name: str) -> PFLModelInfo:
    """The model ``name``; :class:`~benchmark.errors.UnknownNameError` listing the known ones otherwise."""
    return PFL_MODELS.get(name)


def build_model(
    name: str, num_classes: int, *, bn: str | None = None, head_init: str = "default"
) -> nn.Module:
    """The network ``name`` with a ``num_classes`` head; parameters drawn from torch's global generator
    (seed it first)."""
    info = pfl_model_info(name)
    bn = bn or info.default_bn
    if bn not in ("batch", "standard"):
        raise ConfigError(
            f"bn={bn!r}", "use 'batch' (track_running_stats=False, the reference) or 'standard'"
        )
    net = info.build(num_classes, bn)
    if head_init == "orthogonal":
        nn.init.orthogonal_(net.linear.weight)
    elif head_init == "similar_rows":  # fedbabu App. B / Table 24 'X': uniform on [0.45, 0.55], unit rows
        with torch.no_grad():
            net.linear.weight.uniform_(0.45, 0.55)
            net.linear.weight.div_(net.linear.weight.norm(dim=1, keepdim=True))
    elif head_init != "default":
        raise ConfigError(
            f"head_init={head_init!r}", "use 'default' (PyTorch's), 'orthogonal' or 'similar_rows'"
        )
    return net


def place_model(
    model: nn.Module, device: torch.device | str, dtype: torch.dtype, channels_last: bool = False
) -> nn.Module:
    """``model`` on ``device`` in ``dtype``, its 4-d weights in channels-last memory format when
    ``channels_last`` (issue 27: the convolutions then run in NHWC, and so does every activation after the first
    one; a state loaded into it keeps that layout). Contiguous is the recorded runs' layout: channels-last runs
    other kernels, equal to rounding, not bit for bit."""
    model = model.to(device, dtype)
    return model.to(memory_format=torch.channels_last) if channels_last else model


def _bn(channels: int, bn: str) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, track_running_stats=(bn == "standard"))


class _DWBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, bn: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = _bn(cin, bn)
        self.conv2 = nn.Conv2d(cin, cout, 1, 1, 0, bias=False)
        self.bn2 = _bn(cout, bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class MobileNetCifar(nn.Module):
    CFG = (64, (128, 2), 128, (256, 2), 256, (512, 2), 512, 512, 512, 512, 512, (1024, 2), 1024)

    def __init__(self, num_classes: int, bn: str = "batch") -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, 1, 1, bias=False)
        self.bn1 = _bn(32, bn)
        blocks, cin = [], 32
        for c in self.CFG:
            cout, stride = (c, 1) if isinstance(c, int) else c
            blocks.append(_DWBlock(cin, cout, stride, bn))
            cin = cout
        self.layers = nn.Sequential(*blocks)
        self.linear = nn.Linear(1024, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(F.relu(self.bn1(self.conv1(x))))
        return F.avg_pool2d(out, 2).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x))


class ConvNet(nn.Module):
    """``depth`` x [conv3x3(64) + BN + ReLU + maxpool2], then the ``linear`` head (4convNet / 3convNet)."""

    def __init__(self, num_classes: int, bn: str, depth: int, in_channels: int, image_size: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = in_channels
        for _ in range(depth):
            layers += [nn.Conv2d(cin, 64, 3, padding=1), _bn(64, bn), nn.ReLU(), nn.MaxPool2d(2)]
            cin = 64
        self.body = nn.Sequential(*layers)
        side = image_size // 2**depth
        self.linear = nn.Linear(64 * side * side, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x))


class _Basic(nn.Module):
    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int, bn: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = _bn(planes, bn)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = _bn(planes, bn)
        self.shortcut = _shortcut(cin, planes, stride, bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + self.shortcut(x))


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, bn: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = _bn(planes, bn)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = _bn(planes, bn)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = _bn(planes * 4, bn)
        self.shortcut = _shortcut(cin, planes * 4, stride, bn)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))
        return F.relu(self.bn3(self.conv3(out)) + self.shortcut(x))


def _shortcut(cin: int, cout: int, stride: int, bn: str) -> nn.Module:
    if stride == 1 and cin == cout:
        return nn.Sequential()
    return nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), _bn(cout, bn))


class ResNetCifar(nn.Module):
    def __init__(self, block: type, num_blocks: tuple[int, ...], num_classes: int, bn: str) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = _bn(64, bn)
        cin, stages = 64, []
        for planes, n, stride in zip((64, 128, 256, 512), num_blocks, (1, 2, 2, 2), strict=True):
            blocks = []
            for s in [stride] + [1] * (n - 1):
                blocks.append(block(cin, planes, s, bn))
                cin = planes * block.expansion
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(512 * block.expansion, num_classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        return F.avg_pool2d(out, 4).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.features(x))


@register_pfl_model("mobilenet_cifar")
def _mobilenet(num_classes: int, bn: str) -> nn.Module:
    return MobileNetCifar(num_classes, bn)


@register_pfl_model("4convnet")
def _convnet4(num_classes: int, bn: str) -> nn.Module:
    return ConvNet(num_classes, bn, depth=4, in_channels=3, image_size=32)


@register_pfl_model("3convnet", in_channels=1, image_size=28)
def _convnet3(num_classes: int, bn: str) -> nn.Module:
    return ConvNet(num_classes, bn, depth=3, in_channels=1, image_size=28)


@register_pfl_model("resnet18_cifar", default_bn="standard")
def _resnet18(num_classes: int, bn: str) -> nn.Module:
    return ResNetCifar(_Basic, (2, 2, 2, 2), num_classes, bn)


@register_pfl_model("resnet50_cifar", default_bn="standard")
def _resnet50(num_classes: int, bn: str) -> nn.Module:
    return ResNetCifar(_Bottleneck, (3, 4, 6, 3), num_classes, bn)
