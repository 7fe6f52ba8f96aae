"""Whether a claim's quote is on its stated line of the document's text (:mod:`benchmark.papers` finds it).

Quotes are compared whitespace- and case-normalised (the conversions break lines and spacing unevenly).
:func:`check_quotes` runs whenever the catalogue is evaluated (``flb claims``, the ``report`` rule): a quote
that is not on its line is one error naming the claim, its catalogue file, the line it cites and the line(s)
where the words actually are, so a verdict is never shown beside words the paper does not say there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from benchmark.claims.model import Claim
from benchmark.errors import BenchmarkError, ConfigError
from benchmark.papers import PAPER_FILES, line_text, papers_dir

__all__ = ["PAPER_FILES", "Misquote", "check_quotes", "find_quote", "normalise", "papers_dir", "quote_on_line"]


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def quote_on_line(quote: str, document: str, line: int) -> bool:
    """Whether ``quote`` occurs (normalised) on 1-based ``line`` of the document's text."""
    try:
        return normalise(quote) in normalise(line_text(document, line))
    except BenchmarkError:
        return False


def find_quote(quote: str, lines: list[str]) -> list[int]:
    """The 1-based lines of ``lines`` that hold ``quote`` (normalised), or where it starts when it runs on
    into the next line."""
    q = normalise(quote)
    norm = [normalise(t) for t in lines]
    found = [i + 1 for i, t in enumerate(norm) if q in t]
    if not found:
        found = [i + 1 for i in range(len(norm) - 1) if q in f"{norm[i]} {norm[i + 1]}"]
    return found


@dataclass(frozen=True)
class Misquote:
    """A claim whose quote is not on the line it cites; ``found``: the lines where it is (may be empty)."""

    claim: Claim
    text: Path
    found: tuple[int, ...]

    def describe(self) -> str:
        c = self.claim
        where = (
            f"it is on line {self.found[0]}" if len(self.found) == 1
            else f"it is on lines {', '.join(map(str, self.found[:5]))}" if self.found
            else "it is nowhere in the document"
        )  # fmt: skip
        return f"{c.source}: claim {c.id!r}: quote not found on line {c.line} of {c.document} ({self.text.name}); {where}"


def misquotes(claims: Iterable[Claim], folder: Path | None = None) -> tuple[list[Misquote], list[Path]]:
    """The claims whose quote is not on their line, and the document texts that are not there to check."""
    folder = papers_dir() if folder is None else folder
    texts: dict[str, list[str] | None] = {}
    bad, absent = [], []
    for c in claims:
        path = folder / PAPER_FILES[c.document]
        if c.document not in texts:
            texts[c.document] = path.read_text(encoding="utf-8").splitlines() if path.is_file() else None
            if texts[c.document] is None:
                absent.append(path)
        lines = texts[c.document]
        if lines is None:
            continue
        q = normalise(c.quote)
        if 1 <= c.line <= len(lines) and q in normalise(lines[c.line - 1]):  # the rule of quote_on_line
            continue
        bad.append(Misquote(c, path, tuple(find_quote(c.quote, lines))))
    return bad, absent


def check_quotes(claims: Iterable[Claim], folder: Path | None = None) -> list[Path]:
    """Raise one :class:`ConfigError` for the first claim whose quote is not on its line (naming how many
    others are wrong); returns the document texts that were absent, so not checked."""
    bad, absent = misquotes(claims, folder)
    if bad:
        first = bad[0]
        more = f" (and {len(bad) - 1} more misplaced quote(s): {', '.join(m.claim.id for m in bad[1:4])})" if len(bad) > 1 else ""
        fix = (
            f"set line: {first.found[0]} for that claim in {first.claim.source}" if len(first.found) == 1
            else "set its line to the one it cites" if first.found
            else "copy the paper's exact words into quote (whitespace and case do not matter)"
        )  # fmt: skip
        raise ConfigError(first.describe() + more, fix)
    return absent
