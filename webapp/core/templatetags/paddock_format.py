"""Template filters writing numbers and durations as the live pages' script does
(``webapp/core/formatting.py``, ``static/js/format.js``)."""

from __future__ import annotations

from typing import Any

from django import template

from webapp.core import formatting

register = template.Library()


@register.filter
def number(value: Any, digits: int = 3) -> str:
    """``{{ x|number:3 }}``: fixed-point with ``digits`` decimals, ``–`` when missing."""
    return formatting.format_number(value, int(digits))


@register.filter
def percent(value: Any, digits: int = 2) -> str:
    """``{{ x|percent }}``: a fraction as a percentage, ``"46.21 %"``; ``–`` when missing."""
    return formatting.format_percent(value, int(digits))


@register.filter
def signed_percent(value: Any, digits: int = 2) -> str:
    """``{{ x|signed_percent }}``: ``"+1.25 %"`` / ``"-0.40 %"``; ``–`` when missing."""
    return formatting.format_percent(value, int(digits), signed=True)


@register.filter
def signed_number(value: Any, digits: int = 3) -> str:
    """``{{ x|signed_number:3 }}``: ``"+0.031"`` / ``"-0.712"``; ``–`` when missing."""
    number = formatting.finite_or_none(value)
    return formatting.MISSING if number is None else f"{number:+.{int(digits)}f}"


@register.filter
def count(value: Any) -> str:
    """``{{ n|count }}``: a whole number with thousands separators."""
    return formatting.format_count(value)


@register.filter
def duration(seconds: Any) -> str:
    """``{{ s|duration }}``: ``"1 h 30 min"``."""
    return formatting.format_duration(seconds)
