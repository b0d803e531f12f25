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
#: Modules and functions allowed over the limits, with their size (an entry may shrink, not grow,
#: and must go once it fits). None today: every offender of issue 26 was split.
OVERSIZED_MODULES: dict[str, int] = {}
LONG_FUNCTIONS: dict[str, int] = {}


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
        if "migrations" not in path.parts
        and (path.name != "__init__.py" or path.parent.name in {"engine", "services", "selectors"})
    }
    assert sorted(modules - listed) == [], "modules missing from docs/architecture.md"
    assert sorted(listed - modules) == [], "docs/architecture.md lists modules that do not exist"


# --- the runs rule: reads in selectors/, writes in services/ ----------------------------------

RUNS = WEBAPP / "runs"
#: ORM methods that write. ``save`` and ``delete`` count on any receiver (a model instance);
#: the others only on a manager or queryset (``Run.objects.filter(...).update(...)``), so that
#: ``dict.update`` or ``set.update`` do not count.
ALWAYS_WRITES = {"save", "delete"}
QUERYSET_WRITES = {"create", "update", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}
QUERYSET_STEPS = {"objects", "filter", "exclude", "all", "select_for_update", "select_related", "order_by"}
#: Modules of ``webapp/runs`` outside ``services/`` allowed to write, and why.
WRITE_EXEMPT = {
    "models.py": "the models themselves",
    # the per-run event counter (``Run.event_seq``) is taken where events are numbered: the
    # services call it inside their own transaction; no other column is written there
    "events.py": "numbers events (Run.event_seq)",
}


def _receiver_chain(node: ast.AST) -> list[str]:
    """Attribute and call names below a call's receiver: ``Run.objects.filter(...).update`` gives
    ``["filter", "objects", "Run"]``."""
    names = []
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            names.append(node.id)
            return names
        else:
            return names


def _orm_writes(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method, chain = node.func.attr, _receiver_chain(node.func.value)
        if method in ALWAYS_WRITES and "default_storage" not in chain:
            found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} .{method}(")
        elif method in QUERYSET_WRITES and QUERYSET_STEPS & set(chain):
            found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} .{method}(")
    return found


def test_no_module_of_the_runs_app_outside_services_writes_through_the_orm():
    offenders = [
        found
        for path in sorted(RUNS.rglob("*.py"))
        if "migrations" not in path.parts
        and RUNS / "services" not in path.parents
        and str(path.relative_to(RUNS)) not in WRITE_EXEMPT
        for found in _orm_writes(path)
    ]
    assert offenders == [], "writes belong in webapp/runs/services/:\n" + "\n".join(offenders)


def test_the_write_check_sees_the_services_writing():
    """Guards the test above against passing vacuously: it finds the services' writes of each
    kind, and none in a plain ``dict.update``."""
    found = [w for path in (RUNS / "services").rglob("*.py") for w in _orm_writes(path)]
    assert {w.rsplit(" ", 1)[1] for w in found} >= {".save(", ".create(", ".update(", ".delete(", ".bulk_create("}
    assert _orm_writes(RUNS / "selectors" / "compare.py") == []  # calls row.update({...}) on a dict


def _imported_names(path: Path) -> list[tuple[int, str]]:
    """Like :func:`_imported_modules`, with ``from a import b`` also giving ``a.b`` (``b`` may
    be a module)."""
    found = _imported_modules(path)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    return found


def test_the_runs_selectors_never_import_the_services():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
        for path in sorted((RUNS / "selectors").rglob("*.py"))
        for line, module in _imported_names(path)
        if module == "webapp.runs.services" or module.startswith("webapp.runs.services.")
    ]
    assert offenders == []
    assert len(list((RUNS / "selectors").glob("*.py"))) > 10


def test_the_services_build_event_payloads_only_after_commit():
    """A payload of :mod:`webapp.runs.selectors.payloads` reads a run's usage, leaderboard and
    pods; a service calls one only inside a function it hands to ``events.publish`` (a
    ``lambda``), which runs once the transaction commits, never under the row locks."""
    offenders = []
    for path in sorted((RUNS / "services").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        names = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "webapp.runs.selectors.payloads"
            for alias in node.names
        }
        inside_lambdas = {id(n) for lam in ast.walk(tree) if isinstance(lam, ast.Lambda) for n in ast.walk(lam)}
        offenders += [
            f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.func.id}(...)"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
            if id(node) not in inside_lambdas
        ]
    assert offenders == []


def test_one_meaning_per_name_tasks_modules_are_celery_and_specs_are_renamed():
    """``tasks.py`` means Celery entry points; the RL-task modules have names of their own, and
    ``run_generation`` is the trainer's pod function alone (the Celery task keeps its
    registered name for messages in flight)."""
    assert (WEBAPP / "engine" / "task_specs.py").is_file() and not (WEBAPP / "engine" / "tasks.py").exists()
    services = RUNS / "services"
    assert (services / "task_create.py").is_file() and not (services / "tasks.py").exists()
    for path in sorted(WEBAPP.rglob("tasks.py")):
        assert "@app.task" in path.read_text() or "shared_task" in path.read_text(), path
    defines_run_generation = [
        str(path.relative_to(REPO_ROOT))
        for package in ("webapp", "trainer")
        for path in sorted((REPO_ROOT / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name == "run_generation"
    ]
    assert defines_run_generation == ["trainer/pod.py"]
    assert 'name="webapp.runs.tasks.run_generation"' in (RUNS / "tasks.py").read_text()


def test_the_demo_is_an_app_of_its_own_with_its_commands():
    from django.conf import settings

    assert "webapp.demo" in settings.INSTALLED_APPS
    commands = WEBAPP / "demo" / "management" / "commands"
    assert (commands / "demo_setup.py").is_file() and (commands / "demo_account.py").is_file()
    assert not (RUNS / "demo").exists()
