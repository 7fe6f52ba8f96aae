"""The ledger's job kind for a peer comparison (``runs/peer/<id>/``): the comparison's identity is its family,
configuration, seeds and the released code's commit; its output is ``results/peers/...json`` (+ ``.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from benchmark.errors import ConfigError
from benchmark.jobs import Job, register_job


def seeds_tag(seeds: tuple[int, ...]) -> str:
    """``0-1-2`` for seeds (0, 1, 2): a path component."""
    return "-".join(str(s) for s in seeds)


@register_job
@dataclass(frozen=True)
class PeerJob(Job):
    """One ``flb peer`` comparison (issue 26). It is never planned by a table; ``flb peer`` runs it, because
    it needs the user's checkout of the released code."""

    KIND: ClassVar[str] = "peer"
    PATTERN: ClassVar[str] = "results/peers/{family}/{config}/{official_commit}/seeds-{seeds}.json"
    family: str
    config: str
    official_commit: str  # the released code's commit (first 12 hex digits), or ``unknown``
    seeds: str  # seeds_tag()

    @property
    def markdown_path(self) -> str:
        return self.path.removesuffix(".json") + ".md"

    def execute(self, config: Mapping[str, Any]) -> None:
        raise ConfigError(
            f"a peer comparison ({self.family}, {self.config}) needs the released code's checkout",
            f"run: flb peer {self.family} --official-repo PATH --config {self.config}",
        )
