"""Serve a bundle's policy: ONNX inference, observations from market states, one request format.

Modules: :mod:`.policy` (the onnxruntime session and its LRU cache), :mod:`.bodies` (checking
request bodies: observations, holdings, cash, weights, bars, dates), :mod:`.answers` (the answer
to a body: actions, or the observation and orders of a market state), :mod:`.portfolio` (the
market state of a portfolio agent), :mod:`.server` (the standalone HTTP server of
``python -m trainer serve``).

The request path runs no torch code: actions come from the bundle's ``policy.onnx`` through
onnxruntime (:class:`ServedPolicy`), observations are built with NumPy from the bundle's
observation layout (:func:`trainer.envs.stock_trading.build_observation`) and indicators with
the same pipeline that trained the agent (:func:`trainer.data.build_market_data`). The Django
endpoint ``POST /api/agents/{id}/act`` and ``python -m trainer serve BUNDLE.zip`` both call
:func:`answer`, so they give the same JSON for the same body.

Request bodies (JSON objects), one of:

* ``{"observations": [[...], ...]}``: a batch (B, obs_dim) of raw observations built as the
  bundle's ``observation_layout`` says; answers ``actions`` (B, action_dim).
* ``{"date": "YYYY-MM-DD"}``: the state of a trading day of the agent's dataset (the same data
  files the task trained on). For an agent of intraday bars also ``"YYYY-MM-DD HH:MM"``: the
  bar ending then, in exchange time (America/New_York; ``09:35`` is the first 5-minute bar); a
  bare day means that day's last bar (the session close); the answer's ``date`` is the bar's
  ``YYYY-MM-DD HH:MM`` (:func:`~trainer.serving.bodies.dataset_row`). Optional ``cash`` (USD) and ``holdings`` (``{ticker: shares}``),
  default the env's initial cash and no shares.
* ``{"bars": {ticker: [{"date", "open", "high", "low", "close", "volume"}, ...]}}``: recent
  daily bars of every ticker of the agent, oldest first, ending on the day to act on, with at
  least :func:`~trainer.serving.bodies.min_bars_days` days (252: the observation then matches the
  ``date`` path's within 1e-3); optional ``cash`` and ``holdings`` as above. A ``date`` among the
  dataset's first 63 (warm-up) days answers with ``warnings``, or is refused outside the train split.

A stock-trading agent's market state answers ``action`` (action_dim,), ``orders`` (one per
ticker: ``shares`` signed, ``side``, ``price``, ``value``) computed with the env's trade rule
(sells capped by holdings, buys scaled to the cash), ``prices``, ``date``, ``cash``,
``holdings`` and the ``observation`` it built.

A portfolio agent's market state (``kind == "portfolio"``) gives its current portfolio as
``"weights": {ticker: w, ..., "cash": w}`` (fractions of its value) or as ``cash`` and
``holdings`` (fractional shares allowed), converted to weights with the day's closes; neither
means the env's fresh start, all in cash. It answers the ``target_weights`` per ticker and cash,
with a ``rebalance_band`` the ``rebalanced_weights`` the env trades to (the band applied to
the current weights), ``turnover``, and given cash and holdings the ``orders`` and ``costs``
(:func:`~trainer.serving.portfolio.portfolio_answer`).

Bad input raises :class:`~trainer.errors.DataError` naming the field (``observations``,
``date``, ``bars.AAPL[3].close``, ``holdings.MSFT``, ``weights.KO``...): a boolean where a
number goes, an observation value beyond float32, cash and holdings worth more than a float
holds, and any answer that would hold NaN or infinity
(:func:`~trainer.serving.answers.finite_answer`) included.
"""

from trainer.serving.answers import answer
from trainer.serving.bodies import (
    BARS_MIN_DAYS,
    BARS_TOLERANCE,
    MAX_BARS,
    MAX_BATCH,
    min_bars_days,
    min_history_days,
    parse_observations,
)
from trainer.serving.policy import PolicyCache, ServedPolicy
from trainer.serving.server import make_server

__all__ = [
    "BARS_MIN_DAYS",
    "BARS_TOLERANCE",
    "MAX_BARS",
    "MAX_BATCH",
    "PolicyCache",
    "ServedPolicy",
    "answer",
    "make_server",
    "min_bars_days",
    "min_history_days",
    "parse_observations",
]
