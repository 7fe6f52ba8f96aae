"""tools/import_graph.py (issue 25): circles, up-arrows and function-local imports of a package, read with
``ast``; on a synthetic package written to tmp_path, and on the real ``benchmark/`` (no circle, no up-arrow)."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
import_graph = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = import_graph  # its dataclasses look their module up
_spec.loader.exec_module(import_graph)

LAYERS = (("base", ("__init__", "util")), ("lib", ("a", "b", "c", "sub")), ("apps", ("apps",)))


def _write(root: Path, files: dict[str, str]) -> Path:
    pkg = root / "pkg"
    for rel, text in files.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return pkg


def _package(tmp_path: Path) -> Path:
    return _write(
        tmp_path,
        {
            "__init__.py": "",
            "util.py": "import os\n",
            # a <-> b at module level (b imports a relatively, through `from . import a`)
            "a.py": "from pkg import b\nfrom pkg.util import x\n",
            "b.py": "from . import a\n",
            # c -> sub.d only inside a function, sub.d -> c at module level: a circle only with local imports
            "c.py": textwrap.dedent(
                """\
                def f():
                    # local: breaks the circle with sub.d
                    from .sub import d
                    import json
                    from pkg.apps import tool  # noqa: F401
                    return d, json, tool
                """
            ),
            "sub/__init__.py": "",
            "sub/d.py": "from ..c import f\n",
            "apps/__init__.py": "",
            "apps/tool.py": "from pkg.a import *\n",
        },
    )


def test_synthetic_package_circles_up_arrows_and_local_imports(tmp_path) -> None:
    report = import_graph.analyse(_package(tmp_path), LAYERS)
    assert report.modules == 9
    assert report.circles_top == [["pkg.a", "pkg.b"]]
    assert report.circles_all == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub.d"]]
    # library code importing pkg.apps runs back up, even from inside a function; apps -> a does not
    assert [(a.source, a.target, a.kind, a.line) for a in report.up_arrows] == [
        ("pkg.c", "pkg.apps.tool", "local", 5)
    ]
    assert report.unlayered == []
    local = {(imp.imported, imp.internal, imp.reason) for imp in report.local_imports}
    # the comment above the first import is its reason; a pragma (noqa) is not one
    assert local == {
        (".sub", True, "local: breaks the circle with sub.d"),
        ("json", False, None),
        ("pkg.apps", True, None),
    }
    assert report.local_with_reason == 1
    assert not report.ok


def test_clean_package_exits_zero_and_json(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(import_graph, "LAYERS", LAYERS)
    pkg = _write(tmp_path, {"__init__.py": "", "util.py": "", "a.py": "from pkg import util\n"})
    assert import_graph.main(["--package", str(pkg), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["circles_top_level"] == [] and out["up_arrows"] == []
    # a module the layer table does not place is an error of the table
    (pkg / "stray.py").write_text("", encoding="utf-8")
    assert import_graph.main(["--package", str(pkg)]) == 1


def test_typing_only_imports_make_no_circle(tmp_path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "b.py": "from pkg.a import *\n",
        },
    )
    report = import_graph.analyse(pkg, (("all", ("__init__", "a", "b")),))
    assert report.circles_top == [] and report.circles_all == []


def test_layer_patterns_place_a_package_apart_from_its_submodules() -> None:
    layers = (("low", ("util", "plug")), ("high", ("plug.*",)))
    assert import_graph.layer_of("pkg.plug", "pkg", layers) == 0  # the package's __init__: the interface
    assert import_graph.layer_of("pkg.plug.one", "pkg", layers) == 1  # its plug-ins
    assert import_graph.layer_of("pkg.util.x", "pkg", layers) == 0
    assert import_graph.layer_of("pkg.plugin", "pkg", layers) is None  # a prefix of a name is no match


def test_real_tree_has_no_circle_and_no_up_arrow() -> None:
    """Issue 25: no circle of module-level imports, no import running back up the layers (the library never
    imports benchmark/apps/), every module in a layer; a circle closed only through function-local imports
    is broken by imports that each say why (``# local: ...``)."""
    report = import_graph.analyse(ROOT / "benchmark")
    assert report.circles_top == [], report.circles_top
    assert report.up_arrows == [], import_graph.format_report(report)
    assert report.unlayered == []
    reasons = {(imp.module, imp.line): imp.reason for imp in report.local_imports}
    for circle in report.circles_all:
        inside = set(circle)
        modules = import_graph.module_names(ROOT / "benchmark")
        breakers = [
            e
            for m in circle
            for e in import_graph.imports_of(m, modules[m], modules)[0]
            if e.kind == "local" and e.target in inside
        ]
        assert breakers, circle
        assert all(reasons[(e.source, e.line)] for e in breakers), [
            f"{e.source}:{e.line}" for e in breakers if not reasons[(e.source, e.line)]
        ]
