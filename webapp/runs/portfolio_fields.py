"""The New run form's portfolio dynamics fields (trade rate, band mode, execution lag): what
they show, what they put in a task's env and what a clone reads back.

The values are checked by the field (the ``bounds`` table, the same one the services apply to
the API) and again by the trainer's ``PortfolioConfig`` through the services; a default value
is left out of the env, so a task that does not touch them trains exactly as before.
"""

from __future__ import annotations

from typing import Any

from django import forms

from webapp.runs import bounds

__all__ = ["DYNAMICS_DEFAULTS", "PortfolioDynamicsFields", "dynamics_env", "dynamics_initial"]

#: The env keys of these fields and the env's defaults (``PortfolioConfig``).
DYNAMICS_DEFAULTS: dict[str, Any] = {"trade_rate": 1.0, "band_mode": "target", "execution_lag": 0}


def _within(bound: bounds.Bound):
    def check(value) -> None:
        why = bound.error(value) if value is not None else None
        if why:
            raise forms.ValidationError(why)

    return check


class PortfolioDynamicsFields(forms.Form):
    """Declared fields mixed into ``RunForm`` (portfolio tasks only; a stock-trading task ignores them)."""

    trade_rate = forms.FloatField(
        label=bounds.PORTFOLIO_ENV["trade_rate"].label,
        required=False,
        initial=DYNAMICS_DEFAULTS["trade_rate"],
        validators=[_within(bounds.PORTFOLIO_ENV["trade_rate"])],
        widget=forms.NumberInput(attrs={"min": 0, "max": 1, "step": "any"}),
        help_text="Portfolio tasks only: each day the weights move this fraction of the way to their target "
        f"(partial adjustment; 1 = all the way). {bounds.PORTFOLIO_ENV['trade_rate'].text()}.",
    )
    band_mode = forms.ChoiceField(
        label="No-trade band mode",
        choices=[
            ("target", "Trade back to the target"),
            ("edge", "Trade only to the band's edge (Davis & Norman 1990)"),
        ],
        initial=DYNAMICS_DEFAULTS["band_mode"],
        required=False,
        help_text="Portfolio tasks only: where a stock outside the no-trade band is traded to.",
    )
    execution_lag = forms.TypedChoiceField(
        label="Execution lag",
        choices=[(0, "0: trade at the close of the day observed"), (1, "1: trade at the next day's close")],
        coerce=int,
        empty_value=DYNAMICS_DEFAULTS["execution_lag"],
        initial=DYNAMICS_DEFAULTS["execution_lag"],
        required=False,
        help_text="Portfolio tasks only: 1 trades the target chosen on a day's data at the following close.",
    )


def dynamics_env(cleaned: dict[str, Any]) -> dict[str, Any]:
    """The env settings of the cleaned form data that differ from the env's defaults."""
    out = {}
    for key, default in DYNAMICS_DEFAULTS.items():
        value = cleaned.get(key)
        if value not in (None, "") and value != default:
            out[key] = value
    return out


def dynamics_initial(env: dict[str, Any]) -> dict[str, Any]:
    """Form values of a portfolio task's env (its defaults where it has none)."""
    return {key: env.get(key, default) for key, default in DYNAMICS_DEFAULTS.items()}
