"""Fixtures of the fault-and-misuse suite (issue 23): every test here feeds one fault or bad input and
asserts both the exact error (or the correct result) and that nothing else changed.

``tree_guard(path, ...)`` snapshots the sha256 of every file under the given folders before the fault and
checks after it that no file was changed, removed or added (except the ones the test names). ``one_line_error``
reads the ``flb: error: ...`` line a command printed and checks it is a single line with no traceback.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest


def tree_digest(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (empty when it does not exist)."""
    root = Path(root)
    if root.is_file():
        return {root.name: hashlib.sha256(root.read_bytes()).hexdigest()}
    if not root.is_dir():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


class TreeGuard:
    """Snapshots of folders taken at construction; :meth:`check` asserts they are unchanged."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots = [Path(r) for r in roots]
        self.before = {r: tree_digest(r) for r in self.roots}

    def changes(self, allow: Iterable[str] = ()) -> list[str]:
        allowed = set(allow)
        out = []
        for root in self.roots:
            now = tree_digest(root)
            for rel in sorted(set(self.before[root]) | set(now)):
                if rel in allowed or str(root / rel) in allowed:
                    continue
                old, new = self.before[root].get(rel), now.get(rel)
                if old != new:
                    what = "added" if old is None else "removed" if new is None else "changed"
                    out.append(f"{root / rel}: {what}")
        return out

    def check(self, allow: Iterable[str] = ()) -> None:
        changed = self.changes(allow)
        assert not changed, "files changed by a refused input:\n" + "\n".join(changed)


@pytest.fixture()
def tree_guard() -> Callable[..., TreeGuard]:
    """``guard = tree_guard(folder, ...)``; then, after the fault, ``guard.check()``."""
    return lambda *roots: TreeGuard(roots)


@pytest.fixture()
def one_line_error(capsys) -> Callable[[], str]:
    """The single ``flb: error: ...`` line on stderr (asserting it is one line and has no traceback)."""

    def read() -> str:
        err = capsys.readouterr().err.strip()
        assert err.startswith("flb: error: "), err
        assert "\n" not in err and "Traceback" not in err, err
        return err

    return read
