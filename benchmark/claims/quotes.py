"""Whether a claim's quote is on its stated line of the document's text (:mod:`benchmark.papers` finds it).

Quotes are compared whitespace- and case-normalised (the conversions break lines and spacing unevenly).
"""

from __future__ import annotations

import re

from benchmark.errors import BenchmarkError
from benchmark.papers import PAPER_FILES, line_text, papers_dir

__all__ = ["PAPER_FILES", "normalise", "papers_dir", "quote_on_line"]


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def quote_on_line(quote: str, document: str, line: int) -> bool:
    """Whether ``quote`` occurs (normalised) on 1-based ``line`` of the document's text."""
    try:
        return normalise(quote) in normalise(line_text(document, line))
    except BenchmarkError:
        return False
