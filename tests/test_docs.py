"""The README stays a newcomer's page and the documentation's links resolve.

The developers' guide asks for exactly two set-up commands on a new machine (install, tests) and the main
job; the rest lives in ``docs/``. These checks read the files as a newcomer would.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _section(text: str, heading: str) -> str:
    body = text.split(f"\n## {heading}\n", 1)[1]
    return body.split("\n## ", 1)[0]


def _commands(block: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_readme_has_two_setup_commands_and_the_main_job() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = _section(text, "Set up on a new machine")
    blocks = re.findall(r"```bash\n(.*?)```", setup, flags=re.S)
    assert len(blocks) == 1
    assert _commands(blocks[0]) == [
        'python -m pip install -e ".[test]" -c env/constraints.txt',
        "python -m pytest",
    ]
    main_job = re.findall(r"```bash\n(.*?)```", _section(text, "The main job"), flags=re.S)
    assert _commands(main_job[0]) == ["snakemake --cores all table3"]
    assert 150 <= len(text.splitlines()) <= 250, "the README is a newcomer's page: move detail to docs/"


@pytest.mark.parametrize(
    "page", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
)
def test_relative_links_resolve(page: str) -> None:
    path = ROOT / page
    missing = [
        target
        for target in LINK.findall(path.read_text(encoding="utf-8"))
        if "://" not in target and not (path.parent / target).exists()
    ]
    assert not missing, f"{page} links to files that do not exist: {missing}"


def test_every_test_docs_guarantees_names_exists() -> None:
    """docs/guarantees.md holds each promise to a named test: every name it gives (``file.py::test_x``, or a
    ``test_x`` / ``test_x_*`` prefix) must be a test function of that file (or of tests/robustness/), so the page
    cannot cite a test that was renamed or never written."""
    text = (ROOT / "docs" / "guarantees.md").read_text()
    names = re.findall(r"`(?:(?P<file>[\w/]+\.py)::)?(?P<name>test_\w+?)(?P<star>_?\*)?`", text)
    assert len(names) >= 25, names
    defined: dict[str, set[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        defined[path.name] = set(re.findall(r"^def (test_\w+)", path.read_text(), re.M))
    robust = set().union(*(v for k, v in defined.items() if (ROOT / "tests" / "robustness" / k).is_file()))
    missing = []
    for file, name, star in names:
        pool = defined.get(Path(file).name, set()) if file else robust | set().union(*defined.values())
        ok = any(t.startswith(name) for t in pool) if star else name in pool
        if not ok:
            missing.append(f"{file}::{name}{star}" if file else name + star)
    assert not missing, f"docs/guarantees.md names tests that do not exist: {missing}"
