"""Query parameters of the list endpoints and pages: the filters a list reads, and ids read within
the database's range.

A list that drops a parameter it does not know answers as if it were obeyed (``?task=3`` read
as "every run is task 3's"), so every list names its filters and refuses any other parameter
with a 400 naming it (:func:`refuse_unknown`, :class:`ListFilters`). An id filter
(``?run=<id>``) is a whole number; one beyond the 64-bit range of a primary key names no object,
so it filters to nothing, as an id that does not exist does (:func:`filter_by_id`), instead
of reaching the database: SQLite refuses such a number ("Python int too large to convert to
SQLite INTEGER"), which was a 500.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from django.db.models import QuerySet

from webapp.core.errors import AppError

#: The largest primary key: Django's ``BigAutoField``, PostgreSQL's ``bigint`` and SQLite's
#: ``INTEGER`` are all signed 64-bit integers.
ID_MAX = 2**63 - 1

#: Parameters every paginated list takes beside its filters: the page number and DRF's format.
PAGING = ("page", "format")

_DIGITS = re.compile(r"[0-9]+")  # ASCII only: "²".isdigit() is true, and int("²") raises


def refuse_unknown(params: Mapping[str, str], allowed: Iterable[str], *, what: str) -> None:
    """Refuse a parameter ``what`` (``"the agents list"``) does not read.

    Args:
        params: the request's query parameters.
        allowed: the filters of the list; :data:`PAGING` are always allowed.

    Raises:
        AppError: 400 naming the first unknown parameter and listing those the list takes.
    """
    taken = [*allowed, *PAGING]
    for name in params:
        if name not in taken:
            why = f"not a filter of {what} ({', '.join(taken)})"
            raise AppError(f"{name[:40]}: {why}", fields={name[:40]: why})


def id_param(params: Mapping[str, str], name: str, *, allow_blank: bool = False) -> int | None:
    """The id in ``?<name>=``: ``None`` when absent (or blank, with ``allow_blank``: a page's
    form sends its empty filters), else the whole number (possibly above :data:`ID_MAX`;
    :func:`filter_by_id` reads such an id as naming nothing).

    Raises:
        AppError: 400 naming ``name`` when the value is not a whole number (ASCII digits).
    """
    if name not in params:
        return None
    value = (params.get(name) or "").strip()
    if not value and allow_blank:
        return None
    if not _DIGITS.fullmatch(value):
        why = f"expected a {name} id (a whole number), got {value[:40]!r}"
        raise AppError(f"{name}: {why}", fields={name: why})
    return int(value)


def filter_by_id(
    qs: QuerySet, params: Mapping[str, str], name: str, *, lookup: str | None = None, allow_blank: bool = False
) -> QuerySet:
    """``qs`` narrowed to the id in ``?<name>=`` (``lookup`` defaults to ``<name>_id``);
    unchanged when the parameter is absent (or blank, with ``allow_blank``), empty when the id
    is beyond :data:`ID_MAX`.

    Raises:
        AppError: 400 naming ``name`` when the value is not a whole number.
    """
    value = id_param(params, name, allow_blank=allow_blank)
    if value is None:
        return qs
    if value > ID_MAX:
        return qs.none()
    return qs.filter(**{lookup or f"{name}_id": value})


class ListFilters:
    """A viewset mixin: ``GET`` of the list answers 400 for a query parameter that is not one
    of ``list_filters`` (nor :data:`PAGING`), before any row is read."""

    #: The filters the list reads; its docs and OpenAPI parameters name the same.
    list_filters: tuple[str, ...] = ()
    #: How an error names the list: "not a filter of the agents list (...)".
    list_name: str = "this list"

    def list(self, request, *args, **kwargs):
        refuse_unknown(request.query_params, self.list_filters, what=self.list_name)
        return super().list(request, *args, **kwargs)
