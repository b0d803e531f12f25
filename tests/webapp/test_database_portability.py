"""The web side's queries run on both databases Paddock supports (SQLite by default,
PostgreSQL in CI): no lookup, expression or import that only PostgreSQL has.

``./paddock test`` also runs the ``both_databases`` tests on the second database; this check
names the construct before any query runs. Portable replacements live in
``webapp/core/lookups.py`` (``tags__list_has`` for a JSON list holding a string).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Constructs SQLite does not have (Django raises NotSupportedError or fails in SQL there).
POSTGRES_ONLY = {
    r"__contains\s*=\s*[\[{]": "JSONField contains (use webapp.core.lookups: tags__list_has)",
    r"__contained_by\s*=": "JSONField contained_by",
    r"\.distinct\(\s*['\"F]": "distinct(*fields) (DISTINCT ON)",
    r"django\.contrib\.postgres": "django.contrib.postgres",
    r"__overlap\s*=": "ArrayField overlap",
}


def test_no_query_uses_a_construct_only_postgresql_has():
    found = []
    for path in sorted((REPO_ROOT / "webapp").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            for pattern, what in POSTGRES_ONLY.items():
                if re.search(pattern, line):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{number}: {what}")
    assert found == []
