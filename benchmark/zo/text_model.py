"""A text classifier for zeroth-order fine-tuning: a pretrained encoder, pooling, and a linear head.

bernier2024 §4.2.1 fine-tunes RoBERTa-large with MeZO's prompt-based objective (an MLM head scoring label
words, Gao et al. 2021). The substitute encoder here, all-MiniLM-L6-v2, is a sentence encoder without an MLM
head, so this suite uses a **linear head on the pooled sentence embedding** instead (a documented departure,
``docs/fedmezo.md``). The pooling is the encoder's own (MiniLM: mean over tokens, then L2-normalised, as its
sentence-transformers ``modules.json`` states; RoBERTa: the ``<s>`` token), and the head is initialised by
**class means** (FedNCM, legate2023 Algorithm 1: ``W_c = s · μ_c / ||μ_c||``, bias 0), which a federation can
compute exactly from per-client feature sums and counts.

Losses are computed in eval mode (dropout off), without autograd, in fixed length-sorted chunks whose
padding is trimmed, so the same examples always give the same float result (MeZO reference
``trainer.py`` ``zo_forward``: ``model.eval()`` and ``torch.inference_mode()``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from benchmark.errors import ConfigError

#: Examples per forward chunk when a loss or accuracy is computed over many examples.
DEFAULT_CHUNK = 256


@dataclass(frozen=True)
class TextTensors:
    """Tokenised examples: right-padded ``input_ids`` and ``attention_mask`` (N × L) and ``labels`` (N)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor

    def __post_init__(self) -> None:
        n = self.labels.shape[0]
        if self.input_ids.shape[0] != n or self.attention_mask.shape != self.input_ids.shape:
            raise ConfigError(
                f"TextTensors: input_ids {tuple(self.input_ids.shape)}, attention_mask "
                f"{tuple(self.attention_mask.shape)} and labels {tuple(self.labels.shape)} disagree",
                "build them with benchmark.zo.text_model.tokenise",
            )

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    @property
    def lengths(self) -> torch.Tensor:
        return self.attention_mask.sum(dim=1)

    def subset(self, index: torch.Tensor | Sequence[int]) -> TextTensors:
        """The examples at ``index`` (in that order), with padding trimmed to their longest example."""
        idx = torch.as_tensor(index, dtype=torch.long, device=self.labels.device)
        mask = self.attention_mask[idx]
        width = max(int(mask.sum(dim=1).max()), 1) if len(idx) else 1
        return TextTensors(self.input_ids[idx, :width], mask[:, :width], self.labels[idx])

    def to(self, device: torch.device | str) -> TextTensors:
        return TextTensors(self.input_ids.to(device), self.attention_mask.to(device), self.labels.to(device))

    def chunk_index(self, size: int = DEFAULT_CHUNK) -> list[torch.Tensor]:
        """The examples of each length-sorted chunk of at most ``size`` (a stable sort: the chunking is fixed)."""
        if size < 1:
            raise ConfigError(f"chunk size {size}", "use a positive number of examples per chunk")
        order = torch.sort(self.lengths, stable=True).indices
        return [order[i : i + size] for i in range(0, len(self), size)]

    def chunks(self, size: int = DEFAULT_CHUNK) -> list[TextTensors]:
        """The chunks of :meth:`chunk_index`."""
        return [self.subset(index) for index in self.chunk_index(size)]


def tokenise(
    tokenizer,
    texts: Sequence[str],
    labels: Sequence[int],
    max_length: int = 128,
    pairs: Sequence[str] | None = None,
) -> TextTensors:
    """Tokenise ``texts`` once (truncated to ``max_length`` tokens, right-padded to the longest); ``pairs``
    (MNLI's hypotheses) are encoded as the second segment."""
    if len(texts) != len(labels) or (pairs is not None and len(pairs) != len(texts)):
        raise ConfigError(
            f"{len(texts)} texts but {len(labels)} labels", "pass one label (and pair) per text"
        )
    second = None if pairs is None else list(pairs)
    enc = tokenizer(
        list(texts), second, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
    )
    return TextTensors(
        enc["input_ids"].to(torch.long),
        enc["attention_mask"].to(torch.long),
        torch.as_tensor(list(labels), dtype=torch.long),
    )


class TextClassifier(nn.Module):
    """``head(pool(encoder(x)))``: ``pooling`` is ``mean`` (masked mean over tokens) or ``cls`` (first
    token); ``normalize`` L2-normalises the pooled vector (MiniLM's sentence-transformers ``Normalize``)."""

    def __init__(
        self, encoder: nn.Module, hidden: int, classes: int, pooling: str = "mean", normalize: bool = True
    ) -> None:
        super().__init__()
        if pooling not in ("mean", "cls"):
            raise ConfigError(f"pooling {pooling!r}", "use 'mean' or 'cls'")
        self.encoder = encoder
        self.head = nn.Linear(hidden, classes)
        self.pooling = pooling
        self.normalize = normalize

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        tokens = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        if self.pooling == "cls":
            pooled = tokens[:, 0]
        else:
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return F.normalize(pooled, dim=-1) if self.normalize else pooled

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(input_ids, attention_mask))


def loss_sum(model: nn.Module, data: TextTensors, chunk: int = DEFAULT_CHUNK) -> torch.Tensor:
    """Sum of the cross-entropy over ``data`` (eval mode, no autograd, fixed chunks); a 0-d tensor."""
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=data.labels.device)
    with torch.inference_mode():
        for part in data.chunks(chunk):
            logits = model(part.input_ids, part.attention_mask)
            if logits.dtype in (torch.float16, torch.bfloat16):
                logits = logits.float()
            total = total + F.cross_entropy(logits, part.labels, reduction="sum").double()
    return total


def mean_loss(model: nn.Module, data: TextTensors, chunk: int = DEFAULT_CHUNK) -> float:
    """MeZO's loss on a batch: the mean cross-entropy over ``data`` (one float, computed by :func:`loss_sum`)."""
    if len(data) == 0:
        raise ConfigError("mean_loss of an empty batch", "give every batch at least one example")
    return float(loss_sum(model, data, chunk)) / len(data)


def predict(model: nn.Module, data: TextTensors, chunk: int = DEFAULT_CHUNK) -> torch.Tensor:
    """Predicted class per example, in ``data``'s order."""
    model.eval()
    out = torch.empty(len(data), dtype=torch.long, device=data.labels.device)
    with torch.inference_mode():
        for idx in data.chunk_index(chunk):
            part = data.subset(idx)
            out[idx] = model(part.input_ids, part.attention_mask).argmax(dim=1)
    return out


def accuracy(model: nn.Module, data: TextTensors, chunk: int = DEFAULT_CHUNK) -> float:
    """Top-1 accuracy in percent."""
    return 100.0 * float((predict(model, data, chunk) == data.labels).double().mean())


def accuracy_and_loss(model: nn.Module, data: TextTensors, chunk: int = DEFAULT_CHUNK) -> tuple[float, float]:
    """Top-1 accuracy in percent and mean cross-entropy over ``data``, from one forward pass per chunk (a
    validation point: issue 26)."""
    model.eval()
    correct, total = 0, 0.0
    with torch.inference_mode():
        for part in data.chunks(chunk):
            logits = model(part.input_ids, part.attention_mask).float()
            correct += int((logits.argmax(dim=1) == part.labels).sum())
            total += float(F.cross_entropy(logits, part.labels, reduction="sum").double())
    n = max(len(data), 1)
    return 100.0 * correct / n, total / n


def class_feature_sums(
    model: TextClassifier, data: TextTensors, classes: int, chunk: int = DEFAULT_CHUNK
) -> tuple[torch.Tensor, torch.Tensor]:
    """What a FedNCM client sends: per-class sums of its pooled features (float64, C × d) and counts (C)."""
    model.eval()
    sums = None
    counts = torch.zeros(classes, dtype=torch.float64)
    with torch.inference_mode():
        for part in data.chunks(chunk):
            feats = model.features(part.input_ids, part.attention_mask).double().cpu()
            if sums is None:
                sums = torch.zeros(classes, feats.shape[1], dtype=torch.float64)
            sums.index_add_(0, part.labels.cpu(), feats)
            counts += torch.bincount(part.labels.cpu(), minlength=classes).double()
    if sums is None:
        sums = torch.zeros(classes, model.head.in_features, dtype=torch.float64)
    return sums, counts


def ncm_head_(
    model: TextClassifier, client_data: Sequence[TextTensors], scale: float = 1.0, chunk: int = DEFAULT_CHUNK
) -> None:
    """Set ``model.head`` to FedNCM's head from the clients' feature sums: ``W_c = scale · μ_c / ||μ_c||``,
    bias 0 (legate2023 Alg. 1; ``scale`` is a logit scale, 1 = plain FedNCM). Exactly the centralised NCM head
    of the union, up to float64 summation order."""
    classes = model.head.out_features
    sums = torch.zeros(classes, model.head.in_features, dtype=torch.float64)
    counts = torch.zeros(classes, dtype=torch.float64)
    for data in client_data:
        if len(data):
            s, c = class_feature_sums(model, data, classes, chunk)
            sums += s
            counts += c
    means = sums / counts.clamp(min=1.0).unsqueeze(1)
    norms = means.norm(dim=1, keepdim=True)
    weight = torch.where(norms > 0, means / norms.clamp(min=1e-300), torch.zeros_like(means)) * scale
    with torch.no_grad():
        model.head.weight.copy_(weight.to(model.head.weight.dtype))
        model.head.bias.zero_()
