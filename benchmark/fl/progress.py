"""Progress of the round loop: a tqdm bar on a terminal, plain lines in logs, nothing when switched off.

On a terminal (stderr is a TTY) the bar counts rounds (unit ``round``) and shows rounds/s and the ETA
(tqdm's own) plus the last test accuracy. Elsewhere (Snakemake logs, CI) a bar would be a stream of carriage
returns, so one plain line is printed to stderr every ``max(1, rounds // 20)`` rounds and after the last::

    [lp_ft/ft] round 40/200  1.73 rounds/s  ETA 00:01:32  acc 0.8123

Rates and ETAs count only the rounds run by this process (a resumed run does not credit the checkpoint).
"""

from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from tqdm.auto import tqdm


def format_eta(seconds: float) -> str:
    """``hh:mm:ss`` (hours unbounded); ``--:--:--`` when unknown."""
    if not math.isfinite(seconds) or seconds < 0:
        return "--:--:--"
    s = round(seconds)
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def progress_line(label: str, done: int, rounds: int, rate: float, acc: float) -> str:
    """One plain progress line (module docstring)."""
    eta = (rounds - done) / rate if rate > 0 else float("inf")
    return f"[{label}] round {done}/{rounds}  {rate:.2f} rounds/s  ETA {format_eta(eta)}  acc {acc:.4f}"


class RoundProgress:
    """Progress of one stage of ``rounds`` rounds, ``done`` of which are already complete (resume)."""

    def __init__(
        self, label: str, rounds: int, *, done: int = 0, enabled: bool = True, stream: TextIO | None = None
    ) -> None:
        self.label = label
        self.rounds = int(rounds)
        self.done0 = int(done)
        self.stream = stream if stream is not None else sys.stderr
        self.every = max(1, self.rounds // 20)
        self.t0 = time.perf_counter()
        self.acc = float("nan")
        isatty = getattr(self.stream, "isatty", None)
        self.mode = "off" if not enabled else ("bar" if callable(isatty) and isatty() else "lines")
        self.bar = (
            tqdm(total=self.rounds, initial=self.done0, desc=label, unit="round", file=self.stream)
            if self.mode == "bar"
            else None
        )

    def set_acc(self, acc: float) -> None:
        """The latest evaluated test accuracy (NaN rows, not evaluated, are ignored)."""
        if math.isnan(acc):
            return
        self.acc = float(acc)
        if self.bar is not None:
            self.bar.set_postfix(acc=f"{acc:.4f}", refresh=False)

    def round_done(self, done: int) -> None:
        """Round ``done`` (1-based, within the stage) is complete."""
        if self.bar is not None:
            self.bar.update(1)
        elif self.mode == "lines" and (done % self.every == 0 or done == self.rounds):
            elapsed = time.perf_counter() - self.t0
            rate = (done - self.done0) / elapsed if elapsed > 0 else 0.0
            print(progress_line(self.label, done, self.rounds, rate, self.acc), file=self.stream, flush=True)

    def close(self) -> None:
        """Finish the bar (nothing to do for lines)."""
        if self.bar is not None:
            self.bar.close()
