"""Hyperparameter mutation of a copied agent (pure functions, no I/O).

Population-based training (Jaderberg et al., 2017, arXiv 1711.09846, the "explore" step)
perturbs the hyperparameters of an agent a pod copies from the leaderboard
(:mod:`trainer.tournament`) by a random factor, within bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainer.errors import ConfigError
from trainer.tournament import _score_value

ZERO_STEP_FRACTION = 0.01
"""A continuous hyperparameter at 0.0 moves by this fraction of ``max(|low|, |high|)``."""


def _perturb(old: Any, factor: float, low: float, high: float) -> Any:
    """One perturbation of ``old`` by ``factor`` within ``[low, high]`` (rules in :func:`mutate`)."""
    direction = (factor > 1.0) - (factor < 1.0)
    if isinstance(old, int | np.integer):
        lo, hi = math.ceil(low), math.floor(high)
        value = int(round(float(old) * factor))
        if value == old:
            value = int(old) + direction
        # rounding could step just outside a fractional bound; pull back inside
        return min(max(value, lo), hi)
    if float(old) == 0.0:
        value = direction * ZERO_STEP_FRACTION * max(abs(low), abs(high))
    else:
        value = float(old) * factor
    return min(max(value, low), high)


def mutate(
    hyperparameters: Mapping[str, Any],
    bounds: Mapping[str, tuple[float, float]],
    *,
    factors: Sequence[float] = (0.8, 1.2),
    rng: np.random.Generator,
    probability: float = 1.0,
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Perturb hyperparameters PBT-style: multiply each by a random factor, clip to bounds.

    For every name in ``bounds`` (in its order), with probability ``probability`` the value is
    multiplied by one of ``factors`` chosen uniformly and clipped to ``[low, high]``
    (Jaderberg et al., 2017, "perturb"). Names not in ``bounds`` are copied unchanged. Three
    rules keep a perturbation from being a silent no-op:

    - **Integers move at least one step.** The scaled value is rounded; when rounding gives
      the old value back (``2 * 0.8 = 1.6 -> 2``, ``1 * 1.25 -> 1``) the value moves one step
      in the factor's direction (factor < 1 down, > 1 up).
    - **Zero leaves zero by an additive step.** A continuous value at 0.0 (``ent_coef``)
      cannot be scaled, so it moves by ``ZERO_STEP_FRACTION`` (1 %) of the bounds' largest
      magnitude ``max(|low|, |high|)`` in the factor's direction; with bounds ``(0, 0.1)``,
      ``0.0 -> 0.001``, and later mutations scale it as usual.
    - **A bound turns the move around.** When clipping to ``[low, high]`` leaves the value
      where it was (an integer at ``high`` drawn upwards), it moves the same way in the other
      direction instead. Only bounds with ``low == high`` (or a zero value with bounds
      ``(0, 0)``) leave a value unchanged.

    Worked example, factors ``(0.8, 1.25)``: ``update_epochs=2`` becomes 1 or 3;
    ``num_minibatches=1`` with bounds ``(1, 8)`` becomes 2 either way; ``ent_coef=0.0`` with
    bounds ``(0, 0.1)`` becomes 0.001.

    Args:
        hyperparameters: current values, e.g. ``{"learning_rate": 3e-4, "batch_size": 512}``.
        bounds: ``{name: (low, high)}`` of the hyperparameters that may change.
        factors: multiplicative perturbations (> 0).
        rng: NumPy random generator.
        probability: chance in [0, 1] that each bounded hyperparameter is perturbed.

    Returns:
        ``(new_hyperparameters, mutations)``: a new dict (the input is not modified) and
        ``{name: [old, new]}`` for each value that actually changed.

    Raises:
        ConfigError: a bounded name is missing from ``hyperparameters`` or not a number,
            ``low > high``, a factor is not positive, or ``probability`` is outside [0, 1]
            (``field`` names the offender, e.g. ``"bounds.learning_rate"``).
    """
    prob = _score_value(probability, "probability")
    if not 0.0 <= prob <= 1.0:
        raise ConfigError(f"probability must be in [0, 1], got {probability!r}", field="probability")
    if len(factors) == 0:
        raise ConfigError("factors must not be empty", field="factors")
    for i, f in enumerate(factors):
        if not _score_value(f, f"factors[{i}]") > 0:
            raise ConfigError(f"factors must be positive, got {f!r}", field=f"factors[{i}]")
    new = dict(hyperparameters)
    mutations: dict[str, list[Any]] = {}
    for name, bound in bounds.items():
        field = f"bounds.{name}"
        try:
            low, high = (float(b) for b in bound)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{field} must be a (low, high) pair of numbers, got {bound!r}", field=field) from exc
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise ConfigError(f"{field} must have finite low <= high, got {bound!r}", field=field)
        if name not in new:
            raise ConfigError(f"hyperparameter {name!r} has bounds but no value", field=f"hyperparameters.{name}")
        old = new[name]
        if isinstance(old, bool) or not isinstance(old, int | float | np.integer | np.floating):
            raise ConfigError(
                f"hyperparameter {name!r} must be a number to mutate, got {old!r}", field=f"hyperparameters.{name}"
            )
        if isinstance(old, int | np.integer) and math.ceil(low) > math.floor(high):
            raise ConfigError(f"{field} holds no whole number for integer {name!r}, got {bound!r}", field=field)
        if rng.random() >= prob:
            continue
        factor = float(factors[int(rng.integers(len(factors)))])
        value = _perturb(old, factor, low, high)
        if value == old and factor != 1.0:
            value = _perturb(old, 1.0 / factor, low, high)  # at a bound: move the other way
        if value != old:
            new[name] = value
            mutations[name] = [old, value]
    return new, mutations
