"""Closest valid names for a misspelled one, so that an error can say what was probably meant.

Every "unknown key / name" error of the suite (config keys, spec and protocol fields, targets, datasets)
uses :func:`closest` for its suggestion, so the wording is the same everywhere.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, valid: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` names of ``valid`` closest to ``name`` (``difflib`` ratio >= 0.6), best first; a
    case-insensitive exact match comes first."""
    names = sorted({str(v) for v in valid})
    exact = [v for v in names if v.lower() == str(name).lower() and v != name]
    near = difflib.get_close_matches(str(name), names, n=n, cutoff=0.6)
    return list(dict.fromkeys(exact + near))[:n]


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """``"did you mean 'method'?"`` (or ``""`` when nothing is close)."""
    near = closest(name, valid)
    if not near:
        return ""
    return "did you mean " + " or ".join(repr(v) for v in near) + "?"
