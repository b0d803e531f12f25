"""Layering rules that code review alone does not keep.

``webapp/engine.py`` is the one adapter between the web side and the trainer: it converts
types and errors once. A module elsewhere in ``webapp/`` importing ``trainer`` would bypass
that conversion (a trainer error reaching a user as a 500, a NumPy float breaking JSON).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

WEBAPP = REPO_ROOT / "webapp"
ADAPTER = WEBAPP / "engine.py"


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
        if path != ADAPTER
        for line, module in _imported_modules(path)
        if _is_trainer(module)
    ]
    assert offenders == [], "import it through webapp.engine instead:\n" + "\n".join(offenders)


def test_the_check_sees_the_engine_importing_trainer():
    """Guards the test above against passing vacuously (a wrong folder, a parser change)."""
    assert any(_is_trainer(module) for _, module in _imported_modules(ADAPTER))
    assert len(list(WEBAPP.rglob("*.py"))) > 20


def test_trainer_never_imports_the_web_side():
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
        for path in sorted((REPO_ROOT / "trainer").rglob("*.py"))
        for line, module in _imported_modules(path)
        if module.split(".")[0] in {"webapp", "django", "celery", "channels", "rest_framework"}
    ]
    assert offenders == []
