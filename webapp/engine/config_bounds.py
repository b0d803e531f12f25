"""The bounds of the settings a user types, read from the trainer's config classes (the one
place they are declared: ``EnvConfig.BOUNDS``, ``PortfolioConfig.BOUNDS``), and the trainer's
one check of a value against a bound (:class:`trainer.util.bounds.Bound`), which the web's own
bounds (run and budget settings, ``webapp.runs.bounds``) use too, so every range is said alike.

Loads no torch: the config modules are light (``trainer.envs`` registers its Gymnasium ids only).
"""

from __future__ import annotations

from typing import Any


def _config_classes() -> dict[str, type]:
    """``{kind: env config class}``; ``tests/webapp/runs/test_config_bounds.py`` checks it
    against ``trainer.envs.kinds.config_class`` (which loads torch, so it is not called here)."""
    from trainer.envs.portfolio_config import PortfolioConfig
    from trainer.envs.stock_config import EnvConfig

    return {"stock_trading": EnvConfig, "portfolio": PortfolioConfig}


def env_kinds() -> tuple[str, ...]:
    """The task kinds (``"stock_trading"``, ``"portfolio"``) whose env settings have bounds."""
    return tuple(_config_classes())


def env_bounds(kind: str) -> dict[str, dict[str, Any]]:
    """The bounds of every numeric env setting of task kind ``kind``, as the trainer declares
    them: ``{name: {"low", "high", "integer", "low_open", "high_open", "nullable", "unit"}}``
    (``high`` may be ``inf``; units in the setting's own, e.g. USD, fractions of value).

    Raises:
        KeyError: an unknown kind (callers pass one of :func:`env_kinds`).
    """
    return {name: bound.to_dict() for name, bound in _config_classes()[kind].BOUNDS.items()}


def env_bound_errors(kind: str, env: dict[str, Any], *, prefix: str = "env") -> dict[str, str]:
    """Every out-of-bounds env setting of ``env`` at once (the trainer's check,
    ``EnvConfigBase.bound_errors``), as ``{"env.<name>": why}``; ``why`` does not repeat the
    name. An unknown ``kind`` has no bounds here (``validate_task`` names it)."""
    config = _config_classes().get(kind) if isinstance(kind, str) else None
    return config.bound_errors(env, prefix=prefix) if config is not None else {}


def bound_error(limits: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` is outside ``limits`` (the keyword arguments of
    :class:`trainer.util.bounds.Bound`), e.g. ``"must be at least 1 and at most 256, got 0"``,
    or ``None``."""
    from trainer.util.bounds import Bound

    return Bound(**limits).error(value)


def bound_text(limits: dict[str, Any]) -> str:
    """``limits`` in words for a help text: ``"1 to 256"``, ``"more than 0, at most 1"``."""
    from trainer.util.bounds import Bound

    return Bound(**limits).text()


def seed_bound() -> dict[str, Any]:
    """The bound of a random seed (``trainer.util.bounds.SEED``: 0 to 2,147,483,647), the
    command line's ``--seed`` limit too, as :func:`env_bounds` gives each bound."""
    from trainer.util.bounds import SEED

    return SEED.to_dict()
