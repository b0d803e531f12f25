"""Database lookups that behave alike on SQLite and PostgreSQL (the two backends Paddock runs on).

Django's ``contains`` lookup of a ``JSONField`` exists on PostgreSQL (``@>``) but raises
``NotSupportedError`` on SQLite, so a query written with it works in CI (PostgreSQL) and fails
for everyone on the default database. :class:`JSONListHas` asks the one question Paddock needs,
"does this JSON list hold this string?", in each backend's own SQL.
"""

from __future__ import annotations

import json

from django.db import NotSupportedError
from django.db.models import Lookup


class JSONListHas(Lookup):
    """``field__list_has="keep"``: the JSON array in ``field`` holds the string ``"keep"``.

    A row whose value is not an array (``null``, an object, a string) does not match. Register it
    on the field that holds a list (``Model._meta.get_field("tags").register_lookup(JSONListHas)``).

    SQL: PostgreSQL ``lhs @> '["keep"]'::jsonb`` (containment, as Django's ``contains``; an index
    on the column serves it); SQLite ``EXISTS (SELECT 1 FROM json_each(lhs) WHERE value = 'keep'
    AND type = 'text')`` (SQLite's JSON1 table-valued function, https://sqlite.org/json1.html).

    Raises:
        TypeError: the value looked for is not a string.
        NotSupportedError: another database backend.
    """

    lookup_name = "list_has"
    prepare_rhs = False

    def _parts(self, compiler, connection) -> tuple[str, list]:
        if not isinstance(self.rhs, str):
            raise TypeError(f"{self.lookup_name}: expected a string, got {type(self.rhs).__name__}")
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return lhs, list(lhs_params)

    def as_postgresql(self, compiler, connection):
        lhs, params = self._parts(compiler, connection)
        return f"({lhs})::jsonb @> %s::jsonb", [*params, json.dumps([self.rhs])]

    def as_sqlite(self, compiler, connection):
        lhs, params = self._parts(compiler, connection)
        sql = (
            f"(json_type({lhs}) = 'array' AND EXISTS (SELECT 1 FROM json_each({lhs}) AS list_item "
            "WHERE list_item.type = 'text' AND list_item.value = %s))"
        )
        return sql, [*params, *params, self.rhs]

    def as_sql(self, compiler, connection):
        raise NotSupportedError(f"{self.lookup_name}: no SQL for the {connection.vendor} backend")
