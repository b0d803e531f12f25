"""What the env configs share (:class:`EnvConfigBase`): building one from a JSON object with
unknown keys refused, the JSON form, and the field checks whose errors name the dotted field."""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any, Self

from trainer.errors import ConfigError

__all__ = ["EnvConfigBase"]


class EnvConfigBase:
    """Mixin of the env config dataclasses (:class:`~trainer.envs.stock_config.EnvConfig`,
    :class:`~trainer.envs.portfolio_config.PortfolioConfig`); each defines ``validate``."""

    def validate(self, *, prefix: str = "env") -> Self:  # pragma: no cover - defined by each config
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, prefix: str = "env") -> Self:
        """Build and validate a config from a dict; missing keys keep their defaults.

        Args:
            data: e.g. ``{"initial_cash": 1e6}``; ``None`` means all defaults.
            prefix: dotted path used in error fields.

        Raises:
            ConfigError: ``data`` is not a dict, has an unknown key, or a value is invalid
                (``details["field"]`` names it, e.g. ``"env.hmax"``).
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{prefix}: must be an object", field=prefix)
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"{prefix}.{key}: unknown setting; expected one of {', '.join(sorted(known))}",
                    field=f"{prefix}.{key}",
                )
        return cls(**data).validate(prefix=prefix)

    def _bad(self, prefix: str, name: str, why: str) -> ConfigError:
        """The error of field ``name``: ``"<prefix>.<name>: <why> (got <value>)"``."""
        return ConfigError(f"{prefix}.{name}: {why} (got {getattr(self, name)!r})", field=f"{prefix}.{name}")

    def _real(self, prefix: str, name: str) -> float:
        """Field ``name`` as a float. Raises ConfigError unless it is a finite int or float."""
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._bad(prefix, name, "must be a finite number")
        return float(value)

    def _integer(self, prefix: str, name: str) -> int:
        """Field ``name`` as an int. Raises ConfigError unless it is a whole number."""
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise self._bad(prefix, name, "must be a whole number")
        return int(value)
