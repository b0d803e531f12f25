"""Typed readers for environment variables (12-factor settings that fail loudly).

Every reader raises :class:`SettingsError` whose message is one line naming the variable
and what was expected; ``manage.py`` and the ASGI entry point print that line and exit 2.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured


class SettingsError(ImproperlyConfigured):
    """A missing or malformed environment variable."""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value.strip()


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name}: expected one of 1/0/true/false/yes/no, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise SettingsError(f"{name}: expected an integer >= {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name}: expected a number, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")) or (minimum is not None and value < minimum):
        raise SettingsError(f"{name}: expected a finite number >= {minimum}, got {raw!r}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, default: str, *, schemes: tuple[str, ...]) -> str:
    raw = os.environ.get(name)
    value = default if raw is None or raw.strip() == "" else raw.strip()
    parsed = urlparse(value)
    if parsed.scheme not in schemes:
        raise SettingsError(
            f"{name}: expected a URL starting with {' or '.join(s + '://' for s in schemes)}, got {value!r}"
        )
    return value
