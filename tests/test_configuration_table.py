"""The manual's configuration table (``docs/reference/configuration.md``) lists every environment
variable the code reads, and nothing else.

The variables are found in the source, not listed by hand: every ``env_str/env_int/env_float/
env_bool/env_list/env_url("NAME")`` of the settings module, and every ``os.environ.get("NAME")``,
``os.environ["NAME"]`` or ``env.get("NAME")`` (a copy of the environment) in ``webapp/``,
``trainer/`` and the ``paddock`` launcher.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
VARIABLE = re.compile(r"^[A-Z][A-Z0-9_]*[A-Z0-9]$")
SETTINGS_READERS = {"env_str", "env_int", "env_float", "env_bool", "env_list", "env_url"}
ENVIRONMENT_NAMES = {"environ", "env"}


def _is_environment(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id in ENVIRONMENT_NAMES
    )


def _first_string(call: ast.Call) -> str | None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return None


def variables_read(source: str) -> set[str]:
    """Names of the environment variables that ``source`` reads."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = _first_string(node)
            func = node.func
            if name is None or not VARIABLE.match(name):
                continue
            if isinstance(func, ast.Name) and func.id in SETTINGS_READERS:
                names.add(name)
            elif isinstance(func, ast.Attribute) and func.attr in ("get", "getenv") and _is_environment(func.value):
                names.add(name)
            elif isinstance(func, ast.Attribute) and func.attr == "getenv":
                names.add(name)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environment(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and VARIABLE.match(key.value):
                names.add(key.value)
    return names


def code_variables() -> set[str]:
    files = [*sorted((REPO_ROOT / "webapp").rglob("*.py")), *sorted((REPO_ROOT / "trainer").rglob("*.py"))]
    files.append(REPO_ROOT / "paddock")
    return set().union(*(variables_read(f.read_text()) for f in files))


def table_variables() -> set[str]:
    """The variables of the first column of the configuration page's tables."""
    page = (REPO_ROOT / "docs" / "reference" / "configuration.md").read_text()
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", page, flags=re.MULTILINE))


def test_the_scanner_finds_each_way_of_reading_a_variable():
    source = (
        'import os\nA = env_int("PADDOCK_A", 1)\nB = os.environ.get("PADDOCK_B")\nC = os.environ["PADDOCK_C"]\n'
        'def f(env):\n    return env.get("PADDOCK_D"), {"x": 1}.get("NOT_A_VARIABLE")\nos.environ["SET_ONLY"] = "1"\n'
    )

    assert variables_read(source) == {"PADDOCK_A", "PADDOCK_B", "PADDOCK_C", "PADDOCK_D"}


def test_the_settings_module_reads_the_recovery_timings():
    settings_source = (REPO_ROOT / "webapp" / "config" / "settings.py").read_text()

    assert {"PADDOCK_STALE_AFTER_S", "PADDOCK_REDISPATCH_AFTER_S", "PADDOCK_BACKTEST_STALE_AFTER_S"} <= variables_read(
        settings_source
    )


def test_the_configuration_table_lists_exactly_the_variables_the_code_reads():
    in_code, in_table = code_variables(), table_variables()

    assert sorted(in_code - in_table) == [], "read by the code but missing from docs/reference/configuration.md"
    assert sorted(in_table - in_code) == [], "in docs/reference/configuration.md but read nowhere"
