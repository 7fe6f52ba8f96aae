"""Which state entries are the head and which the body (fedbabu's reference: ``'linear' in name``), and the
body's leading conv blocks that fedbabu App. F.3 updates alone (Tables 14/15); torch-free, so that the algorithm
registry (:mod:`benchmark.pfl.algorithms`) and the planner that reads it import no torch.

Parts (an :class:`~benchmark.pfl.algorithms.Algorithm`'s ``local_part`` / ``aggregate_part``): ``full``, ``body``,
``head``, ``none``, and ``conv1`` / ``conv12`` / ``conv123`` -- the first one, two or three blocks of the
convNets' body (:class:`benchmark.pfl.models.ConvNet`: each block is conv3x3 + BatchNorm + ReLU + max-pool, the
modules ``body.{4(b-1)}`` to ``body.{4b-1}`` of block ``b``). App. F.3 names the parts by their convolutions
("Conv1", "Conv12", ...); this suite counts a block's BatchNorm affine parameters with its convolution (the
ablation's code is not released; the BN sits between that conv and the next block)."""

from __future__ import annotations

import re

#: The head's name in every pfl network (:mod:`benchmark.pfl.models`): the reference's final ``linear`` layer.
HEAD_KEY = "linear"
#: Modules per block of :class:`benchmark.pfl.models.ConvNet`'s ``body`` (conv, BN, ReLU, max-pool).
CONVNET_BLOCK_MODULES = 4
#: The parts made of the body's leading conv blocks (fedbabu App. F.3), with the number of blocks each holds.
CONV_PARTS = {"conv1": 1, "conv12": 2, "conv123": 3}
#: Every part name an algorithm may give.
PARTS = ("full", "body", "head", "none", *CONV_PARTS)

_BODY_MODULE = re.compile(r"^body\.(\d+)\.")


def is_head(key: str) -> bool:
    """Whether a state or parameter name belongs to the head (the reference's ``'linear' in name``)."""
    return HEAD_KEY in key


def conv_block(key: str) -> int | None:
    """The 1-based block of a convNet body entry (``body.4.weight`` -> 2), None for any other entry."""
    m = _BODY_MODULE.match(key)
    return int(m.group(1)) // CONVNET_BLOCK_MODULES + 1 if m else None


def in_part(key: str, part: str) -> bool:
    """Whether the state or parameter ``key`` belongs to ``part`` (one of :data:`PARTS`)."""
    if part in CONV_PARTS:
        block = conv_block(key)
        return block is not None and block <= CONV_PARTS[part]
    return part == "full" or (part == "head" and is_head(key)) or (part == "body" and not is_head(key))


def missing_blocks(part: str, keys) -> list[int]:
    """The conv blocks ``part`` names that no entry of ``keys`` belongs to (empty for a part not made of
    blocks): a conv part of a network without a convNet body trains nothing."""
    if part not in CONV_PARTS:
        return []
    have = {conv_block(k) for k in keys}
    return [b for b in range(1, CONV_PARTS[part] + 1) if b not in have]
