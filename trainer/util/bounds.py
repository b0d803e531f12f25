"""The bounds of a numeric setting (:class:`Bound`), declared once next to the config class
that owns the setting (``EnvConfig.BOUNDS``, ``PortfolioConfig.BOUNDS``) and read from there
by the config's own checks, the command line and the web side (through ``webapp/engine``,
which sizes its form inputs and help texts from :meth:`Bound.to_dict`).

The limits are wider than anything that trains well; they exist so that a typo (initial cash
``1e300``, a cost of ``0.5``) is an error naming the field instead of a budget spent on
useless agents.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from trainer.errors import ConfigError

__all__ = [
    "ACTION_NOISE",
    "MAX_ACTION_NOISE",
    "MAX_LOGIT",
    "MAX_PENALTY",
    "MAX_SCALE",
    "PENALTY",
    "SCALE",
    "SEED",
    "Bound",
    "bound_errors",
    "format_number",
]


@dataclass(frozen=True)
class Bound:
    """``low <= value <= high`` for one number.

    Attributes:
        low, high: the limits, in the setting's unit; ``high`` may be ``math.inf``.
        integer: whole numbers only (``3.0`` counts as whole).
        low_open: ``low < value`` instead of ``low <= value``.
        high_open: ``value < high`` instead of ``value <= high``.
        nullable: ``None`` is allowed (the setting is off, e.g. no turbulence stop).
        unit: appended to the limits in messages, e.g. ``" USD"``.
    """

    low: float
    high: float = math.inf
    integer: bool = False
    low_open: bool = False
    high_open: bool = False
    nullable: bool = False
    unit: str = ""

    def error(self, value: Any) -> str | None:
        """Why ``value`` is out of bounds (``"must be at least 0 and at most 0.1, got 0.5"``),
        or ``None`` when it is within them.

        Integers are compared exactly, never through ``float``: JSON allows integers of any
        length, and one of 400 digits has no float (``OverflowError``); it is simply too large.
        """
        if value is None and self.nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number{' or null' if self.nullable else ''}, got {_shown(value)}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if self.integer and isinstance(value, float) and not value.is_integer():
            return f"must be a whole number, got {value!r}"
        too_low = value <= self.low if self.low_open else value < self.low
        too_high = value >= self.high if self.high_open else value > self.high
        if too_low or too_high:
            return f"must be {self.text(words=True)}, got {format_number(value)}"
        return None

    def text(self, *, words: bool = False) -> str:
        """The range in words: ``"1 to 1,000,000"`` for help texts, or with ``words`` as an
        error says it: ``"at least 1 and at most 1,000,000"``."""
        low = f"more than {format_number(self.low)}" if self.low_open else f"at least {format_number(self.low)}"
        if math.isinf(self.high):
            return low + self.unit
        high = f"below {format_number(self.high)}" if self.high_open else f"at most {format_number(self.high)}"
        if words or self.low_open or self.high_open:
            return f"{low}{'' if words else ','} {'and ' if words else ''}{high}{self.unit}"
        return f"{format_number(self.low)} to {format_number(self.high)}{self.unit}"

    def check(self, value: Any, field: str) -> None:
        """Raise ``ConfigError("<field>: <why>", field=field)`` when ``value`` is out of bounds."""
        why = self.error(value)
        if why:
            raise ConfigError(f"{field}: {why}", field=field)

    def to_dict(self) -> dict[str, Any]:
        """The declaration as plain JSON-able values (``high`` may be ``inf``)."""
        return asdict(self)


#: A random seed: a 31-bit whole number, 0 to 2,147,483,647, on the command line (``--seed``) and
#: the web (a run's and a study's ``seed``). Outside it NumPy refused ``--seed -1`` and the env's
#: torch generator overflowed on ``--seed 99999999999999999999``, each a traceback.
SEED = Bound(0, 2**31 - 1, integer=True)

#: The largest weight of a term of a loss: the direct learner's ``variance_penalty``,
#: ``tracking_penalty``, ``turnover_penalty`` and ``weight_decay`` (a pull of every weight towards
#: zero, the 1/N anchor), the portfolio env's ``turnover_penalty``, and PPO's and A2C's
#: ``ent_coef`` and ``vf_coef``. The defaults are 0.01 to 20 and 1e12 still trains; 1e30 made the
#: first gradient infinite in float32 and was reported as a divergence blaming the learning rate
#: (a ``weight_decay`` of 1e300 too: "DIRECT diverged at update 1: a parameter is NaN;
#: learning_rate=0.003"); the direct learner also refuses a decay step ``learning_rate *
#: weight_decay`` of 1 or more.
MAX_PENALTY = 1e6
#: ``0 <= weight <= MAX_PENALTY``.
PENALTY = Bound(0, MAX_PENALTY)

#: The largest step size, scale or clip of an algorithm that has no natural ceiling: every
#: learning rate, ``max_grad_norm``, ``obs_clip``, ``reward_scale``, PPO's ``clip_coef`` and
#: ``value_clip_coef``, SAC's ``initial_alpha`` (and the magnitude of its ``target_entropy``).
#: The defaults are 3e-4 to 10, and every one of these trains at 1e6 without an error. A
#: learning rate of 1e6 is kept on purpose: it is how the tests make a line diverge, and the
#: divergence error (which says to lower the learning rate) is the right answer to a step size
#: that is merely too large. At 1e300 PPO's ``reward_scale`` or ``vf_coef`` was reported as a
#: divergence blaming the learning rate, and ``obs_clip`` or ``clip_coef`` was a traceback (a
#: float32 overflow in torch).
MAX_SCALE = 1e6
#: ``0 < value <= MAX_SCALE``.
SCALE = Bound(0, MAX_SCALE, low_open=True)

#: The largest std or clip of TD3's and DDPG's Gaussian noise (``exploration_noise``,
#: ``target_policy_noise``, ``target_noise_clip``), in action units: actions lie in [-1, 1], so
#: noise of 10 (five widths of that range) already makes every action a coin toss between the
#: ends; the paper's values are 0.1 to 0.5. An ``exploration_noise`` of 1e300 was a traceback.
MAX_ACTION_NOISE = 10.0
#: ``0 <= noise <= MAX_ACTION_NOISE``.
ACTION_NOISE = Bound(0, MAX_ACTION_NOISE)

#: The largest logit setting of the portfolio env's action map, ``logit_scale`` (logits per unit
#: of action) and ``cash_bias`` (the cash logit of a zero action is ``-cash_bias``); the
#: defaults are 4 and 20. At 100 one stock may already weigh ``e^200`` times another and a zero
#: action's cash weight is ``e^-100``, below float32's smallest number, so a larger value changes
#: no weight an env on an accelerator computes. The cross-sectional policy's ``kappa`` is at
#: most ``logit_scale / 2``, so its ``e^kappa`` stays below ``e^50`` (float32 overflows past
#: ``e^88``). A ``logit_scale`` of 1e308 was a traceback ("value cannot be converted to type
#: float without overflow") and 1e30 or a ``cash_bias`` of 1e308 were accepted.
MAX_LOGIT = 100.0


def bound_errors(values: Mapping[str, Any], bounds: Mapping[str, Bound], *, prefix: str = "") -> dict[str, str]:
    """Every out-of-bounds value of ``values`` at once, as ``{prefix + name: why}``; names
    missing from ``values`` are skipped (they keep their defaults)."""
    out = {}
    for name, bound in bounds.items():
        if name in values:
            why = bound.error(values[name])
            if why:
                out[prefix + name] = why
    return out


def format_number(value: float) -> str:
    """``10000000000.0`` -> ``"10,000,000,000"``, ``1e300`` -> ``"1e+300"``, ``0.1`` -> ``"0.1"``;
    an integer too long for a float is shown by its length (``"a 400-digit number"``)."""
    if isinstance(value, int) and abs(value) >= 10**100:
        return f"a {len(str(abs(value)))}-digit number"
    if math.isfinite(value) and float(value).is_integer() and abs(value) < 1e13:
        return f"{int(value):,}"
    return f"{value:g}"


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (an error message must not grow with the input)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
