"""The metric contract: what each reported figure means, as text for report footnotes, and
the short-window rule (annualised figures of windows under a quarter are withheld on screen)."""

from __future__ import annotations

import empyrical

MIN_ANNUALISED_DAYS = 63
"""Fewest daily returns (a quarter) for which annualised figures are shown (the contract)."""

ANNUALISED_KEYS = (
    "annual_return",
    "annual_volatility",
    "sharpe_ratio",
    "sortino_ratio",
    "calmar_ratio",
    "alpha",
    "turnover_annual",
)
"""Metrics that extrapolate to a year: withheld on screen below :data:`MIN_ANNUALISED_DAYS`."""


def short_window_text(min_days: int = MIN_ANNUALISED_DAYS) -> str:
    """What pages and exports show instead of an annualised figure of a short window."""
    return f"n/a (window shorter than {min_days} days)"


METRIC_CONTRACT = """\
Metrics follow empyrical's contract (empyrical-reloaded {version}).
Inputs are simple daily returns (0.01 = 1 %) of consecutive trading days; a year is 252 days.
- Cumulative return: product of (1 + r) minus 1.
- Annual return (CAGR): (1 + cumulative return) ** (252 / number of days) - 1.
- Annual volatility: sample standard deviation (ddof 1) of daily returns times sqrt(252).
- Sharpe ratio: mean(r - rf) / std(r - rf, ddof 1) * sqrt(252), rf = per-day risk-free rate
  (default 0).
- Sortino ratio: mean(r - rf) * 252 / (sqrt(mean(min(r - rf, 0) ** 2)) * sqrt(252)).
- Max drawdown: the largest fall of wealth from a running peak, wealth starting at 1 before the
  first return; reported as a negative fraction with its peak, trough and recovery dates and
  its duration in trading days from the peak to the recovery (or to the last day if the
  drawdown has not recovered).
- Calmar ratio: annual return / |max drawdown|; not defined (blank) without a drawdown.
- Alpha and beta vs the benchmark (QQQ unless stated): beta = cov(r - rf, b - rf) / var(b - rf);
  alpha = (1 + mean((r - rf) - beta * (b - rf))) ** 252 - 1 (annualised, compounded).
- Information ratio: empyrical's excess Sharpe, mean(r - b) / std(r - b, ddof 1), per day
  (not annualised; multiply by sqrt(252) for an annual figure).
- Daily win rate: share of days with a return above zero.
- Turnover: traded notional (buys + sells, USD) of a day / account value that day, averaged
  over the days; the annual figure is the daily mean times 252.
Missing (NaN) returns count as days for annualisation, as in empyrical, and are skipped by
means and standard deviations.
Windows shorter than {min_days} trading days: annual return, annual volatility, Sharpe, Sortino,
Calmar, alpha and annual turnover are shown as "n/a (window shorter than {min_days} days)"
(annualising a few days multiplies noise: a 5-day window can show a Calmar ratio of 954); the
data keeps their values with short_window = true, next to the per-day mean return, per-day
volatility and per-day Sharpe ratio (mean / std, not annualised).
Intraday data (bars of 1 to 60 minutes): the inputs are simple returns of consecutive bars and
every "252" above becomes the data's periods per year, bars per regular session x 252
(78 x 252 = 19,656 for 5-minute bars, 390 x 252 for 1-minute bars); per-day figures, the win
rate and the information ratio are then per bar, "num_periods" counts bars and "num_days"
sessions, the short-window rule counts sessions, the drawdown duration is in sessions (and in
bars as max_drawdown_duration_bars) and turnover is summed per session before the daily mean.
"daily" then holds the same metrics from the bars aggregated to session closes (the product of
(1 + r) over each session's bars minus 1, so the first bar carries the overnight move), on
252-day years: the figures to compare an intraday agent with a daily one.
""".format(version=getattr(empyrical, "__version__", "?"), min_days=63)
"""Plain-text description of the definitions above, for report footnotes."""
