"""The five documents' plain text (``../shared/papers``, index in its README): where it is, and its lines.

Figures (:mod:`benchmark.figures`) and claims (:mod:`benchmark.claims`) cite a document by short id and a
1-based line of its text file; this module resolves those citations. The folder is ``FLB_PAPERS_DIR``, else the
first ``shared/papers`` found above the repository (a git worktree sits deeper than the checkout).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from benchmark.errors import ConfigError, DataMissingError

#: Short id -> text file (../shared/papers/README.md).
PAPER_FILES: dict[str, str] = {
    "legate2023ws": "000_8bda71ac3c7db9f8.txt",
    "legate2023": "001_fcb2cf211ff402fe.txt",
    "fedcof": "002_8e3ac9d01cb44bea.txt",
    "bernier2024": "003_6eba87e4b697c929.txt",
    "fedbabu": "004_d0304c7dab735e6c.txt",
}


def papers_dir() -> Path:
    """``FLB_PAPERS_DIR``, else the first ``shared/papers`` above this package."""
    if os.environ.get("FLB_PAPERS_DIR"):
        return Path(os.environ["FLB_PAPERS_DIR"])
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "shared" / "papers").is_dir():
            return parent / "shared" / "papers"
    return here.parents[2] / "shared" / "papers"


@functools.cache
def paper_lines(paper: str) -> tuple[str, ...]:
    """The lines of document ``paper`` (short id), without line ends."""
    if paper not in PAPER_FILES:
        raise ConfigError(f"unknown document {paper!r}", f"use one of: {', '.join(PAPER_FILES)}")
    path = papers_dir() / PAPER_FILES[paper]
    if not path.is_file():
        raise DataMissingError(
            f"{path} not found", "put the papers in ../shared/papers or set FLB_PAPERS_DIR"
        )
    return tuple(path.read_text(encoding="utf-8").splitlines())


def line_text(paper: str, line: int) -> str:
    """Line ``line`` (1-based) of document ``paper``."""
    lines = paper_lines(paper)
    if not 1 <= line <= len(lines):
        raise ConfigError(f"{paper} has {len(lines)} lines, not {line}", "cite a line of the document's text")
    return lines[line - 1]
