"""Where the papers' plain text lives and whether a claim's quote is on its stated line.

The short ids and files follow ../shared/papers/README.md. Quotes are compared whitespace- and
case-normalised (the conversions break lines and spacing unevenly).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PAPER_FILES = {
    "legate2023": "001_fcb2cf211ff402fe.txt",
    "legate2023ws": "000_8bda71ac3c7db9f8.txt",
    "fedcof": "002_8e3ac9d01cb44bea.txt",
    "bernier2024": "003_6eba87e4b697c929.txt",
    "fedbabu": "004_d0304c7dab735e6c.txt",
}


def papers_dir(start: str | Path | None = None) -> Path | None:
    """``$FLB_PAPERS_DIR``, else the first ``shared/papers`` above ``start`` (a worktree sits deeper)."""
    if os.environ.get("FLB_PAPERS_DIR"):
        return Path(os.environ["FLB_PAPERS_DIR"])
    here = Path(start or __file__).resolve()
    for parent in here.parents:
        if (parent / "shared" / "papers").is_dir():
            return parent / "shared" / "papers"
    return None


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def quote_on_line(quote: str, document: str, line: int, folder: Path) -> bool:
    """Whether ``quote`` occurs (normalised) on 1-based ``line`` of the document's text."""
    lines = (folder / PAPER_FILES[document]).read_text().splitlines()
    return 1 <= line <= len(lines) and normalise(quote) in normalise(lines[line - 1])
