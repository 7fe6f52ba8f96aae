"""Loading the standalone scripts of ``tools/`` in tests: they are files, not modules of the package.

One loader and one import probe serve every ``tests/test_tools_*.py`` (issue 25: one helper, not a copy of the
same spec dance per test module)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]

#: What a lent GPU machine lacks: a bench script that imports one of these cannot run there.
NOT_ON_A_GPU_MACHINE = (
    "pandas",
    "snakemake",
    "jsonschema",
    "yaml",
    "safetensors",
    "matplotlib",
    "scipy",
    "hypothesis",
)


def tool_path(name: str) -> Path:
    """``tools/<name>.py`` of this checkout."""
    return ROOT / "tools" / f"{name}.py"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` executed as the module ``name``, registered in ``sys.modules`` first (dataclasses
    look their module up while the class is built); the same code runs as on the command line."""
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def heavy_imports(name: str, unwanted: tuple[str, ...] = NOT_ON_A_GPU_MACHINE) -> list[str]:
    """The top-level packages of ``unwanted`` that running ``tools/<name>.py`` (as a module named ``name``, in a
    fresh interpreter, with the checkout first on ``sys.path``) imports, sorted; ``[]`` when none."""
    code = (
        f"import json, runpy, sys; sys.path.insert(0, {str(ROOT)!r}); "
        f"runpy.run_path({str(tool_path(name))!r}, run_name={name!r}); "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(unwanted)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)
