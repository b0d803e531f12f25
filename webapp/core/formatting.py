"""How numbers and durations are written on the pages, once: the templates use these functions
and ``static/js/format.js`` implements the same rules for live updates;
``tests/webapp/test_formatting.py`` runs both on one table of values and requires the same text.

Rounding is half-up (``floor(x + 0.5)``) everywhere, as JavaScript's ``Math.round``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

#: What a missing or undefined value shows as.
MISSING = "–"


def finite_or_none(value: Any) -> float | None:
    """``value`` as a finite float, or ``None`` (missing, a bool, not a number, NaN, infinite):
    the web side's one reading of a stored number (pages, telemetry points, baselines). The
    trainer's ``trainer.util.jsonable.finite_or_none`` is stricter: it raises on a non-number,
    since the trainer only hands it numbers it computed."""
    if value is None or isinstance(value, bool):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def format_duration(seconds: Any) -> str:
    """Seconds as the largest two units: ``59.4`` -> ``"59 s"``, ``119.6`` -> ``"2 min"``,
    ``5400`` -> ``"1 h 30 min"``, ``90000`` -> ``"1 d 1 h"``; a zero second unit is left out.
    Negative, missing or non-finite: ``"–"``."""
    value = finite_or_none(seconds)
    if value is None or value < 0:
        return MISSING
    total = _round_half_up(value)
    if total < 60:
        return f"{total} s"
    for unit, size, small, small_size in (("min", 60, "s", 1), ("h", 3600, "min", 60), ("d", 86400, "h", 3600)):
        if unit == "d" or total < size * (60 if unit == "min" else 24):
            big, rest = divmod(total, size)
            part = rest // small_size
            return f"{big} {unit}" + (f" {part} {small}" if part else "")
    raise AssertionError("unreachable")  # pragma: no cover


def format_number(value: Any, digits: int) -> str:
    """Fixed-point with ``digits`` decimals (``0.81234, 3`` -> ``"0.812"``); ``"–"`` if missing."""
    number = finite_or_none(value)
    return MISSING if number is None else f"{number:.{digits}f}"


def format_percent(value: Any, digits: int = 2, *, signed: bool = False) -> str:
    """A fraction as a percentage (``0.4621, 2`` -> ``"46.21 %"``; ``signed``: ``"+46.21 %"``);
    ``"–"`` if missing."""
    number = finite_or_none(value)
    if number is None:
        return MISSING
    return f"{number * 100:{'+' if signed else ''}.{digits}f} %"


def format_count(value: Any) -> str:
    """A whole number with thousands separators (``1234567.4`` -> ``"1,234,567"``)."""
    number = finite_or_none(value)
    return MISSING if number is None else f"{_round_half_up(number):,}"


def format_general(value: Any, precision: int = 4) -> str:
    """``precision`` significant digits, C's ``%g`` (``0.0003`` -> ``"0.0003"``, ``1e-05`` ->
    ``"1e-05"``, ``1234567`` -> ``"1.235e+06"``); other values as JSON writes them
    (``true``, ``null``, text as it is)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, int | float):
        return str(value)
    return f"{float(value):.{precision}g}"


def format_hyperparameters(values: Mapping[str, Any], keys: Iterable[str]) -> str:
    """``"learning_rate=0.0003 ent_coef=0.01"``: the ``keys`` present in ``values``, numbers
    with 4 significant digits."""
    return " ".join(f"{key}={format_general(values[key])}" for key in keys if key in values)
