"""What the env configs share (:class:`EnvConfigBase`): building one from a JSON object with
unknown keys refused, the JSON form, the bounds of every numeric setting (each config's
``BOUNDS``, declared next to its fields and checked by :meth:`EnvConfigBase.check_bounds`), and
the field checks whose errors name the dotted field."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, ClassVar, Self

from trainer.errors import ConfigError
from trainer.util.bounds import Bound, bound_errors

__all__ = ["EnvConfigBase"]


class EnvConfigBase:
    """Mixin of the env config dataclasses (:class:`~trainer.envs.stock_config.EnvConfig`,
    :class:`~trainer.envs.portfolio_config.PortfolioConfig`); each defines ``validate`` and
    ``BOUNDS``, the limits of its numeric settings (the web side's are generated from them)."""

    #: ``{field: Bound}`` of every numeric setting; ``validate`` checks them first.
    BOUNDS: ClassVar[dict[str, Bound]] = {}

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

    @classmethod
    def bound_errors(cls, data: dict[str, Any], *, prefix: str = "env") -> dict[str, str]:
        """Every out-of-bounds value of ``data`` at once (not just the first), as
        ``{"<prefix>.<name>": why}``; keys that are not bounded settings are skipped."""
        return bound_errors(data, cls.BOUNDS, prefix=f"{prefix}.")

    def check_bounds(self, prefix: str) -> None:
        """Raise the first error of :attr:`BOUNDS` (a ``ConfigError`` naming ``<prefix>.<name>``)."""
        for name, bound in self.BOUNDS.items():
            bound.check(getattr(self, name), f"{prefix}.{name}")

    def _bad(self, prefix: str, name: str, why: str) -> ConfigError:
        """The error of field ``name``: ``"<prefix>.<name>: <why> (got <value>)"``."""
        return ConfigError(f"{prefix}.{name}: {why} (got {getattr(self, name)!r})", field=f"{prefix}.{name}")
