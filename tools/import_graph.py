"""The import graph of ``benchmark/``: circles, imports that run back up the layers, function-local imports.

Issue 25 asks for "no import circles; the library never imports ``benchmark/apps/``; function-local imports
only for optional heavy dependencies, each with a one-line reason", measured by a small script over the
import graph. This is that script::

    python -m tools.import_graph            # a readable report; exit 1 on a circle or an up-arrow
    python -m tools.import_graph --json     # the same as JSON

How the graph is read (``ast`` only, nothing is imported):

* every ``import a.b`` / ``from a.b import c`` of every module of the package, at module level (class bodies
  and ``try`` / ``if`` blocks at module level count as module level) and inside functions (*function-local*);
  imports under ``if TYPE_CHECKING:`` are *typing-only* (they never run) and kept apart;
* relative imports are resolved against the importing module (a package's ``__init__`` is its own package);
  ``from pkg import name`` is an edge to ``pkg.name`` when that is a module of the package, else to ``pkg``;
  an edge goes to the module named, not to the ``__init__`` of the packages above it;
* imports of names ``importlib.import_module`` receives as strings are not seen (``flb``'s application table,
  ``benchmark.fl``'s lazy exports): they run when called, never at import time.

What it reports:

(a) **circles**: strongly connected components of more than one module (or a module importing itself) among
    module-level imports: the headline, they can fail at import time. The same over all runtime imports
    (function-local ones too) is reported beside it: a circle closed only by a function-local import is a
    cycle-breaker hiding a circle of design.
(b) **up-arrows**: every import (module-level or function-local; typing-only too) from a module of a lower
    layer of :data:`LAYERS` to one of a higher layer; any import of ``benchmark.apps`` from outside the top
    layer is one.
(c) **function-local imports**: how many, how many of them import the package's own modules, and how many
    carry a one-line reason: a comment on the import's line or alone on the line above (tool pragmas such
    as ``# noqa`` or ``# fmt: skip`` are not reasons). The convention is ``# local: <why>``.
(d) the exit status is 1 when there is a circle of module-level imports or an up-arrow, so CI can gate on it.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import sys
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

#: The layers of ``benchmark/``, bottom first: a module may import modules of its own layer and of the layers
#: below it, never one above. A module belongs to the layer of the longest pattern that matches it: ``a.b``
#: matches ``a.b`` and every module under it, ``a.b.*`` only the modules under it (so a package's
#: ``__init__``, e.g. the runner plug-in interface ``runners``, can sit below its plug-ins ``runners.*``).
#: A module no pattern matches is reported as unlayered (an error of this table, not of the code). Names are
#: relative to the package (``fl.engine`` is ``benchmark.fl.engine``; ``__init__`` is the package itself).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",  # utilities with no domain: errors, files, paths, seeds, schemas, provenance, tidy rows
        (
            "__init__",
            "errors",
            "fs_errors",
            "io",
            "paths",
            "seeding",
            "schema",
            "kv",
            "portable",
            "provenance",
            "timing",
            "devices",
            "gpu_slots",
            "suggest",
            "papers",
            "build_lock",
            "tidy",
            "registry",
            "reasons",
        ),
    ),
    ("data", ("data",)),  # datasets by name, their files and downloads, partitions, subsets
    (
        "resources",  # backbones and their weights, the named protocols, the printed values
        ("models", "protocols", "expected"),
    ),
    ("engine", ("federated",)),  # the one round loop every training family runs on (issue 25)
    (
        "methods",  # what computes a number: features, closed-form heads, costs, the three training stacks
        ("features", "closed_form", "costs", "fl", "pfl", "zo", "curves", "curve_plots"),
    ),
    (
        "steps",  # one job's computation, files in, files out; the typed jobs that call them
        (
            "pipeline",
            "fl.jobs",
            "fl.train_tuning",
            "pfl.run",
            "zo.run",
            "zo.select_run",
            "diagnostics",
            "jobs",
            "peers.job",
        ),
    ),
    (
        "planning",  # specs, availability, plans and assembly of the tables, the runner interface, verdicts, ledger
        ("tables", "runners", "verdict", "ledger"),
    ),
    ("runner plug-ins", ("runners.*",)),  # one module per runner: plan a cell's jobs, collect their outputs
    (
        "outputs",  # figures, claims, report and site; the workflow's helpers; harvesting recorded runs
        (
            "figures",
            "claims",
            "report",
            "report_guard",
            "site",
            "workflow",
            "harvest",
            "harvest_estimate",
            "harvest_park",
            "ledger_import",
            "peers",
        ),
    ),
    ("apps", ("apps", "cli", "ledger_cli", "harvest_cli", "estimate_cli", "peer_cli", "seeds_cli")),  # the command line and the applications
)

PRAGMAS = ("noqa", "fmt:", "type:", "pragma:", "isort:", "pylint:", "ruff:")


@dataclass(frozen=True)
class Import:
    """One import statement's edge to a module of the package."""

    source: str  # importing module, e.g. "benchmark.fl.jobs"
    target: str  # imported module of the package
    line: int
    kind: str  # "top" (module level), "local" (inside a function) or "typing" (under TYPE_CHECKING)


@dataclass(frozen=True)
class LocalImport:
    """One function-local import statement (of any module, the package's own or not)."""

    module: str
    line: int
    imported: str  # the module named in the statement, as written (relative ones with their dots)
    internal: bool  # imports a module of the package
    reason: str | None  # the reason comment, or None


@dataclass(frozen=True)
class UpArrow:
    source: str
    source_layer: str
    target: str
    target_layer: str
    line: int
    kind: str


@dataclass
class Report:
    package: str
    modules: int
    edges: int
    circles_top: list[list[str]] = field(default_factory=list)
    circles_all: list[list[str]] = field(default_factory=list)
    up_arrows: list[UpArrow] = field(default_factory=list)
    unlayered: list[str] = field(default_factory=list)
    local_imports: list[LocalImport] = field(default_factory=list)

    @property
    def local_with_reason(self) -> int:
        return sum(imp.reason is not None for imp in self.local_imports)

    @property
    def ok(self) -> bool:
        """No circle of module-level imports, no up-arrow, no module outside the layer table."""
        return not self.circles_top and not self.up_arrows and not self.unlayered

    def to_json(self) -> dict:
        local = self.local_imports
        return {
            "package": self.package,
            "modules": self.modules,
            "edges": self.edges,
            "circles_top_level": self.circles_top,
            "circles_with_function_local": self.circles_all,
            "up_arrows": [asdict(a) for a in self.up_arrows],
            "unlayered": self.unlayered,
            "function_local_imports": {
                "total": len(local),
                "internal": sum(imp.internal for imp in local),
                "with_reason": self.local_with_reason,
                "without_reason": [
                    f"{imp.module}:{imp.line} {imp.imported}" for imp in local if imp.reason is None
                ],
            },
            "ok": self.ok,
        }


# --------------------------------------------------------------------------------------------- parsing


def module_names(package_dir: Path) -> dict[str, Path]:
    """Every module of the package under ``package_dir``: dotted name -> file (``__init__`` named as its package)."""
    root = package_dir.name
    out: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir).with_suffix("")
        parts = [root, *rel.parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _comments(source: str) -> dict[int, tuple[str, bool]]:
    """Line -> (comment text without '#', whether the comment is alone on its line)."""
    out: dict[int, tuple[str, bool]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                alone = not tok.line[: tok.start[1]].strip()
                out[tok.start[0]] = (tok.string.lstrip("#").strip(), alone)
    except (tokenize.TokenError, SyntaxError):
        pass
    return out


def _is_reason(text: str) -> bool:
    low = text.lower()
    return bool(low) and not any(low.startswith(p) for p in PRAGMAS)


def _reason(comments: dict[int, tuple[str, bool]], line: int) -> str | None:
    """The reason comment of an import on ``line``: on that line, or alone on the line above."""
    same = comments.get(line)
    if same and _is_reason(same[0]):
        return same[0]
    above = comments.get(line - 1)
    if above and above[1] and _is_reason(above[0]):
        return above[0]
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_imports(tree: ast.Module) -> Iterable[tuple[ast.Import | ast.ImportFrom, str]]:
    """Each import statement with its kind: "top", "local" (inside a function) or "typing"."""

    def visit(node: ast.AST, kind: str) -> Iterable[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, kind
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, "local" if kind == "top" else kind)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), "typing")
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from visit(child, kind)

    yield from visit(tree, "top")


def _base(module: str, is_package: bool, level: int) -> str:
    """The package a relative import of ``level`` dots in ``module`` starts from."""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> tuple[list[Import], list[LocalImport]]:
    """The package-internal import edges of one module, and its function-local import statements."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    comments = _comments(source)
    is_package = path.name == "__init__.py"
    edges: list[Import] = []
    local: list[LocalImport] = []
    for node, kind in _walk_imports(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            written = ", ".join(alias.name for alias in node.names)
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = _base(module, is_package, node.level)
                absolute = f"{base}.{node.module}" if node.module else base
            else:
                absolute = node.module or ""
            written = "." * node.level + (node.module or "")
            for alias in node.names:
                sub = f"{absolute}.{alias.name}"
                targets.append(sub if sub in modules else absolute)
        internal = sorted({t for t in targets if t in modules})
        for target in internal:
            edges.append(Import(module, target, node.lineno, kind))
        if kind == "local":
            local.append(
                LocalImport(module, node.lineno, written, bool(internal), _reason(comments, node.lineno))
            )
    return edges, local


# --------------------------------------------------------------------------------------------- analysis


def strongly_connected(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The circles of a directed graph: strongly connected components of more than one node, or a node with
    an edge to itself; each sorted, the list sorted (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    out.append(sorted(comp))
    return sorted(out)


def layer_of(module: str, package: str, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> int | None:
    """Index in ``layers`` (0 = bottom) of the longest pattern matching ``module`` (:data:`LAYERS`); None if
    none does."""
    rel = module[len(package) + 1 :] if module != package else "__init__"
    best: tuple[int, int] | None = None  # (pattern length, layer)
    for i, (_, patterns) in enumerate(layers):
        for pattern in patterns:
            if pattern.endswith(".*"):
                hit = rel.startswith(pattern[:-1])
            else:
                hit = rel == pattern or rel.startswith(pattern + ".")
            if hit and (best is None or len(pattern) > best[0]):
                best = (len(pattern), i)
    return None if best is None else best[1]


def analyse(package_dir: Path, layers: Sequence[tuple[str, Sequence[str]]] | None = None) -> Report:
    """Read every module under ``package_dir`` and report circles, up-arrows and function-local imports
    (layers: :data:`LAYERS` unless given)."""
    layers = LAYERS if layers is None else layers
    package_dir = Path(package_dir)
    package = package_dir.name
    modules = module_names(package_dir)
    edges: list[Import] = []
    local: list[LocalImport] = []
    for name, path in modules.items():
        e, loc = imports_of(name, path, modules)
        edges += e
        local += loc
    top = {(e.source, e.target) for e in edges if e.kind == "top"}
    runtime = {(e.source, e.target) for e in edges if e.kind != "typing"}
    report = Report(package=package, modules=len(modules), edges=len({(e.source, e.target) for e in edges}))
    report.circles_top = strongly_connected(modules, top)
    report.circles_all = strongly_connected(modules, runtime)
    layer_index = {m: layer_of(m, package, layers) for m in modules}
    report.unlayered = sorted(m for m, i in layer_index.items() if i is None)
    seen: set[tuple[str, str, str]] = set()
    for e in sorted(edges, key=lambda e: (e.source, e.line, e.target)):
        src, dst = layer_index[e.source], layer_index[e.target]
        if src is None or dst is None or dst <= src:
            continue
        if (e.source, e.target, e.kind) in seen:
            continue
        seen.add((e.source, e.target, e.kind))
        report.up_arrows.append(UpArrow(e.source, layers[src][0], e.target, layers[dst][0], e.line, e.kind))
    report.local_imports = local
    return report


# --------------------------------------------------------------------------------------------- output


def format_report(report: Report, verbose: bool = False) -> str:
    lines = [f"{report.package}: {report.modules} modules, {report.edges} import edges"]
    lines.append(f"(a) circles of module-level imports: {len(report.circles_top)}")
    lines += [f"    {' -> '.join(c)}" for c in report.circles_top]
    lines.append(f"    counting function-local imports too: {len(report.circles_all)}")
    lines += [f"    {' -> '.join(c)}" for c in report.circles_all if c not in report.circles_top]
    lines.append(f"(b) imports running back up the layers: {len(report.up_arrows)}")
    lines += [
        f"    {a.source}:{a.line} ({a.source_layer}) -> {a.target} ({a.target_layer}){'' if a.kind == 'top' else f' [{a.kind}]'}"
        for a in report.up_arrows
    ]
    if report.unlayered:
        lines.append(f"    modules in no layer of LAYERS: {', '.join(report.unlayered)}")
    local = report.local_imports
    internal = sum(imp.internal for imp in local)
    lines.append(
        f"(c) function-local imports: {len(local)} ({internal} of the package's own modules), "
        f"{report.local_with_reason} with a reason comment"
    )
    if verbose:
        lines += [
            f"    {imp.module}:{imp.line} {imp.imported}{'' if imp.reason is None else '  # ' + imp.reason}"
            for imp in local
        ]
    lines.append("OK" if report.ok else "FAIL: circles or up-arrows (exit 1)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.import_graph", description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--verbose", "-v", action="store_true", help="list every function-local import")
    parser.add_argument(
        "--package",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "benchmark",
        help="the package directory (default: this checkout's benchmark/)",
    )
    args = parser.parse_args(argv)
    report = analyse(args.package)
    print(json.dumps(report.to_json(), indent=1) if args.json else format_report(report, args.verbose))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
