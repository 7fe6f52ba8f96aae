"""A run killed in the middle of a round, for the checkpoint/resume tests of the round loops (one helper for
``test_pfl_core.py`` and ``test_pfl_procedures.py``; issue 25)."""

from __future__ import annotations

from typing import Any


class Interrupted(Exception):
    """Raised by the round that :func:`interrupt_at` breaks."""


def interrupt_at(trainer: Any, round_idx: int) -> None:
    """Make ``trainer.train_round`` raise :class:`Interrupted` when called for round ``round_idx`` (0-based);
    the rounds before it run as usual, so a checkpoint written after them is on disk."""
    real_round = trainer.train_round

    def train_round(r, clients, lr):
        if r == round_idx:
            raise Interrupted
        return real_round(r, clients, lr)

    trainer.train_round = train_round
