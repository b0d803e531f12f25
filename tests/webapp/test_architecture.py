"""Layering rules that code review alone does not keep.

The ``webapp/engine/`` package is the one adapter between the web side and the trainer: it
converts types and errors once. A module elsewhere in ``webapp/`` importing ``trainer`` would bypass
that conversion (a trainer error reaching a user as a 500, a NumPy float breaking JSON).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

WEBAPP = REPO_ROOT / "webapp"
ADAPTER = WEBAPP / "engine"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in a file, function-level and ``TYPE_CHECKING`` ones
    included; relative imports resolve inside ``webapp`` and cannot name ``trainer``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def _is_trainer(module: str) -> bool:
    return module == "trainer" or module.startswith("trainer.")


def test_only_the_engine_module_imports_trainer():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
        for path in sorted(WEBAPP.rglob("*.py"))
        if ADAPTER not in path.parents
        for line, module in _imported_modules(path)
        if _is_trainer(module)
    ]
    assert offenders == [], "import it through webapp.engine instead:\n" + "\n".join(offenders)


def test_the_check_sees_the_engine_importing_trainer():
    """Guards the test above against passing vacuously (a wrong folder, a parser change)."""
    assert any(_is_trainer(module) for path in ADAPTER.rglob("*.py") for _, module in _imported_modules(path))
    assert len(list(WEBAPP.rglob("*.py"))) > 20


def test_trainer_never_imports_the_web_side():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
        for path in sorted((REPO_ROOT / "trainer").rglob("*.py"))
        for line, module in _imported_modules(path)
        if module.split(".")[0] in {"webapp", "django", "celery", "channels", "rest_framework"}
    ]
    assert offenders == []


# --- import cycles -------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules(package: str) -> dict[str, Path]:
    root = REPO_ROOT / package
    return {
        _module_name(path): path
        for path in sorted(root.rglob("*.py"))
        if "migrations" not in path.parts and "__pycache__" not in path.parts
    }


def _import_targets(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules ``path`` imports anywhere in it (module level, inside functions, under
    ``TYPE_CHECKING``): ``from a.b import c`` is an edge to ``a.b.c`` when that is a module,
    else to ``a.b``. Relative imports are resolved against the file's package."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.add(sub if sub in modules else base)
    return {t for t in targets if t in modules and t != name}


def _import_graph(*packages: str) -> dict[str, set[str]]:
    modules: dict[str, Path] = {}
    for package in packages:
        modules.update(_project_modules(package))
    return {name: _import_targets(path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles_in_webapp_or_trainer():
    """A cycle held together by an import inside a function is still a cycle: the check reads
    every import statement of every module."""
    cycles = _cycles(_import_graph("webapp", "trainer"))
    assert cycles == [], "modules importing each other (directly or around a loop):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_check_finds_a_cycle_through_an_import_inside_a_function():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    # The graph of the real tree has edges from function-level imports (celery's worker hook
    # imports the engine inside a function).
    assert "webapp.engine" in _import_graph("webapp", "trainer")["webapp.config.celery"]


def test_the_runs_app_never_imports_the_reports_app():
    """Reports depend on runs (agents, tasks); runs announce a finished run with the
    ``run_finished`` signal instead of calling into reports."""
    graph = _import_graph("webapp")
    offenders = sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        if module.startswith("webapp.runs")
        for target in targets
        if target.startswith("webapp.reports")
    )
    assert offenders == []


def test_core_errors_is_a_leaf():
    """Every app raises ``AppError``; importing it must not pull in the engine (or anything of
    ours), or each new import risks a cycle."""
    assert _import_graph("webapp")["webapp.core.errors"] == set()


def test_no_dynamic_imports_in_webapp_or_trainer():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line}"
        for package in ("webapp", "trainer")
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        for line, module in _imported_modules(path)
        if module == "importlib"
    ]
    assert offenders == []


# --- sizes: no module over 500 lines, no function over 120 -----------------------------------

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 120
#: Today's offenders, each being split by another change of issue 26, with its size when the
#: limits were added. An entry may shrink but not grow, and must go once it fits: the merger
#: of those changes empties these lists.
OVERSIZED_MODULES = {
    "webapp/runs/selectors.py": 594,
}
LONG_FUNCTIONS = {
    "webapp/runs/services/tasks.py:task_prepare": 152,
}


def _sized_modules() -> dict[str, Path]:
    return {
        str(path.relative_to(REPO_ROOT)): path
        for package in ("trainer", "webapp")
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    }


def _function_lengths(path: Path) -> dict[str, int]:
    """``{"Class.method" or "function": lines}`` of every function of ``path`` (nested ones too),
    from its ``def`` line to its last line, docstring included, decorators not."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), filename=str(path)), "")
    return lengths


def test_no_module_is_over_500_lines():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _sized_modules().items()}
    offenders = {name: lines for name, lines in sizes.items() if lines > OVERSIZED_MODULES.get(name, MAX_MODULE_LINES)}
    assert offenders == {}, f"split these modules by concept (limit {MAX_MODULE_LINES} lines): {offenders}"
    fixed = sorted(name for name in OVERSIZED_MODULES if sizes.get(name, 0) <= MAX_MODULE_LINES)
    assert fixed == [], "these modules fit now (or are gone): remove them from OVERSIZED_MODULES"


def test_no_function_is_over_120_lines():
    lengths = {
        f"{name}:{function}": lines
        for name, path in _sized_modules().items()
        for function, lines in _function_lengths(path).items()
    }
    offenders = {key: lines for key, lines in lengths.items() if lines > LONG_FUNCTIONS.get(key, MAX_FUNCTION_LINES)}
    assert offenders == {}, f"read these as named steps (limit {MAX_FUNCTION_LINES} lines): {offenders}"
    fixed = sorted(key for key in LONG_FUNCTIONS if lengths.get(key, 0) <= MAX_FUNCTION_LINES)
    assert fixed == [], "these functions fit now (or are gone): remove them from LONG_FUNCTIONS"


def test_the_size_checks_measure_functions_and_methods_by_their_qualified_names():
    lengths = _function_lengths(REPO_ROOT / "trainer" / "pod.py")
    assert set(lengths) >= {"run_generation", "ProgressReporter.report", "train", "train.record"}
    assert lengths["train.record"] < lengths["train"] <= MAX_FUNCTION_LINES


def test_the_layout_in_docs_lists_every_module():
    """``docs/architecture.md`` shows the layout as a tree, one line per module; a module added
    or moved without updating it fails here."""
    text = (REPO_ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Layout (one line per module)", 1)[1].split("```", 2)[1]
    listed, folders = set(), []
    for line in block.splitlines():
        if not line.strip():
            continue
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        folders = folders[:depth]
        if name.endswith("/"):
            folders.append(name.rstrip("/"))
        elif name.endswith(".py"):
            listed.add("/".join([*folders, name]))
    modules = {
        str(path.relative_to(REPO_ROOT))
        for package in ("trainer", "webapp")
        for path in (REPO_ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (path.name != "__init__.py" or path.parent.name in {"engine", "services"})
    }
    assert sorted(modules - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(listed - modules) == [], "docs/architecture.md lists modules that do not exist"
