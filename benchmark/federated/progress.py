"""Progress of long loops: a tqdm bar on a terminal, plain lines in logs, nothing when switched off.

:class:`RoundProgress` counts the rounds of a training stage, :class:`CountProgress` the items (images) of a
feature extraction.

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


def count_line(
    label: str, done: int, total: int, rate: float, unit: str, elapsed: float | None = None
) -> str:
    """One plain line of :class:`CountProgress`: items done / total, items per second and the time left, or
    (``elapsed`` given, at the end) the time taken::

        [extract cifar10/train squeezenet1_1] 12800/50000 img (26%)  45.1 img/s  ETA 00:13:45
    """
    pct = f" ({100 * done // total}%)" if total > 0 else ""
    speed = f"{rate:.1f} {unit}/s" if rate > 0 else f"- {unit}/s"
    if elapsed is not None:
        when = f"done in {format_eta(elapsed)}"
    else:
        when = f"ETA {format_eta((total - done) / rate if rate > 0 else float('inf'))}"
    return f"[{label}] {done}/{total} {unit}{pct}  {speed}  {when}"


class CountProgress:
    """Progress of ``total`` items (e.g. the images of an extraction).

    On a terminal (``stream`` is a TTY) a tqdm bar, which shows the rate and the time left itself. Elsewhere
    (Snakemake logs, a pipe, CI) one :func:`count_line` when started, then one every ``every_s`` seconds, and
    a last one with the time taken from :meth:`close`. Nothing at all when ``enabled`` is false.
    """

    def __init__(
        self,
        label: str,
        total: int,
        *,
        unit: str = "img",
        enabled: bool = True,
        stream: TextIO | None = None,
        every_s: float = 30.0,
    ) -> None:
        self.label, self.total, self.unit, self.every_s = label, int(total), unit, float(every_s)
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.t0 = self.last = time.perf_counter()
        isatty = getattr(self.stream, "isatty", None)
        self.mode = "off" if not enabled else ("bar" if callable(isatty) and isatty() else "lines")
        self.bar = (
            tqdm(total=self.total, desc=label, unit=unit, file=self.stream, leave=False)
            if self.mode == "bar"
            else None
        )
        if self.mode == "lines":
            self._line()

    def _line(self, elapsed: float | None = None) -> None:
        spent = time.perf_counter() - self.t0
        rate = self.done / spent if spent > 0 and self.done else 0.0
        print(
            count_line(self.label, self.done, self.total, rate, self.unit, elapsed),
            file=self.stream,
            flush=True,
        )

    def update(self, n: int) -> None:
        """``n`` more items are done."""
        self.done += int(n)
        if self.bar is not None:
            self.bar.update(n)
        elif self.mode == "lines":
            now = time.perf_counter()
            if now - self.last >= self.every_s and self.done < self.total:
                self.last = now
                self._line()

    def close(self) -> None:
        """Finish: close the bar, or print the last line (with the time taken)."""
        if self.bar is not None:
            self.bar.close()
        elif self.mode == "lines":
            self._line(elapsed=time.perf_counter() - self.t0)


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
