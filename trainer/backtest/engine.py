"""Run a deterministic policy over a date range and compare it with buy-and-hold benchmarks.

The backtest is the trading env itself (:class:`~trainer.envs.stock_trading.StockTradingVecEnv`, or
:class:`~trainer.envs.portfolio.PortfolioVecEnv` for a portfolio agent) with one env, starting on the first day, no random start, no episode length), so a policy is
evaluated under exactly the trading rules, costs and observation it was trained with. The
policy on day ``t`` sees only the observation of day ``t`` (prices and indicators up to ``t``,
its own cash and holdings) and trades at day ``t``'s close. The day loop is
:func:`trainer.backtest.policy_run.run_policy`, the one the validation score uses too.

Benchmarks start from the same capital on the same first day and are valued on exactly the same
dates: QQQ buy-and-hold (adjusted close, so dividends are reinvested) and an equal-weight
buy-and-hold of the traded tickers. Both hold fractional shares bought at the first day's close
without transaction costs (the usual reference lines of FinRL/ElegantRL backtests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from trainer.backtest.benchmark import AlignedBenchmark, align_benchmark
from trainer.backtest.benchmark import load_benchmark_close as load_benchmark_close
from trainer.backtest.contract import METRIC_CONTRACT
from trainer.backtest.equal_weight import equal_weight_comparison
from trainer.backtest.metrics import compute_metrics, returns_from_values
from trainer.backtest.policy_run import Policy, PolicyTrace, run_policy
from trainer.backtest.robustness import robustness_report
from trainer.data.market import MarketData
from trainer.data.sessions import stamp_text
from trainer.data.splits import MIN_RANGE_DAYS
from trainer.data.timestamps import infer_periods_per_year
from trainer.envs.kinds import make_env, prepare_market, uses_scale_free
from trainer.envs.observations import FeatureStats, fit_feature_stats
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.errors import ConfigError, DataError
from trainer.selection import equal_weight_returns
from trainer.util.dates import parse_day
from trainer.util.jsonable import finite_or_none

#: Fewest days before a backtest window to fit observation statistics on when none are given.
MIN_STATS_DAYS = 126
AGENT = "agent"
QQQ = "QQQ"
EQUAL_WEIGHT = "equal_weight"


@dataclass
class BacktestResult:
    """Outcome of :func:`run_backtest`.

    Attributes:
        daily: DataFrame indexed by date (``DatetimeIndex`` named ``date``), one row per trading
            day. Row ``d`` is the account as the policy saw it at the close of day ``d``, before
            trading, and what it then traded at that close:

            * ``account_value`` float64 USD, cash plus holdings at day ``d``'s close (the first
              row is the initial capital);
            * ``cash`` float64 USD and ``holdings_<TICKER>`` float64 shares before the trades;
            * ``trades_<TICKER>`` float64 shares executed at day ``d``'s close (+ bought,
              - sold); ``holdings[d + 1] = holdings[d] + trades[d]`` for stock trading; a
              portfolio agent pays its costs out of every position pro rata, so there
              ``holdings[d + 1] = (holdings[d] + trades[d]) * (1 - costs[d] / account_value[d])``
              and a ticker the no-trade band held has no trade (:func:`executed_trades`);
            * ``weight_<TICKER>`` float64 fraction of the account in that ticker at day
              ``d``'s close, before the trades (holdings x close / account value; the rest is cash);
            * ``traded_value`` float64 USD, buys plus sells at day ``d``'s close;
            * ``costs`` float64 USD of transaction costs paid on day ``d``;
            * ``turnover`` float64 fraction, ``traded_value / account_value``.

            The last day has no trades (the backtest ends at its close).
        benchmarks: DataFrame on the same dates with the value in USD of each benchmark,
            columns ``"equal_weight"`` and, when a benchmark close was given, ``"QQQ"``.
        metrics: ``{"agent": {...}, "equal_weight": {...}, "QQQ": {...}}``, each from
            :func:`~trainer.backtest.metrics.compute_metrics` with QQQ's daily returns as the
            benchmark when available (the agent's also has turnover); plus
            ``vs_equal_weight`` and ``vs_equal_weight_with_costs`` (the agent against the
            cost-free and the fair 1/N: interval, p-value, verdict; :mod:`trainer.backtest.equal_weight`)
            and ``robustness`` (cost sensitivity, execution lag, drawdowns, VaR/CVaR, beta to 1/N,
            turnover; :mod:`trainer.backtest.robustness`).
        actions: DataFrame (days but the last) x tickers of the raw actions in [-1, 1].
        tickers: traded tickers, in the policy's action order.
        env_config: the trading rules used (random start and episode length switched off).
        notes: what the backtest did (days, tickers, the benchmark's basis).
        benchmark_basis: how QQQ was compared (:data:`trainer.backtest.benchmark.BASES`:
            ``"daily"``, ``"bars"``, ``"session_closes"``), ``""`` without a benchmark.
    """

    daily: pd.DataFrame
    benchmarks: pd.DataFrame
    metrics: dict[str, dict[str, Any]]
    actions: pd.DataFrame
    tickers: tuple[str, ...]
    env_config: EnvConfig
    notes: list[str] = field(default_factory=list)
    benchmark_basis: str = ""

    @property
    def holdings(self) -> pd.DataFrame:
        """Shares held entering each day: DataFrame dates x tickers (float64)."""
        return self._per_ticker("holdings_")

    @property
    def trades(self) -> pd.DataFrame:
        """Shares traded at each day's close: DataFrame dates x tickers (float64, + buy, - sell)."""
        return self._per_ticker("trades_")

    def _per_ticker(self, prefix: str) -> pd.DataFrame:
        frame = self.daily[[prefix + t for t in self.tickers]].copy()
        frame.columns = list(self.tickers)
        return frame

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary for storage: plain lists, floats and strings (no NaN).

        Returns:
            ``{"start", "end", "tickers", "env_config", "dates", "daily": {column: [...]},
            "benchmarks": {name: [...]}, "metrics": {...}, "metric_contract", "notes"}``;
            dates are ``YYYY-MM-DD`` strings, money in USD, shares as floats.
        """
        dates = [stamp_text(d) for d in self.daily.index]
        return {
            "start": dates[0],
            "end": dates[-1],
            "tickers": list(self.tickers),
            "env_config": self.env_config.to_dict(),
            "dates": dates,
            "daily": {c: _floats(self.daily[c]) for c in self.daily.columns},
            "benchmarks": {c: _floats(self.benchmarks[c]) for c in self.benchmarks.columns},
            "metrics": self.metrics,
            "metric_contract": METRIC_CONTRACT,
            "notes": list(self.notes),
            "benchmark_basis": self.benchmark_basis,
        }


def _floats(series: pd.Series) -> list[float | None]:
    return [finite_or_none(x) for x in series.to_numpy(dtype=np.float64)]


def _select_tickers(data: MarketData, tickers: Sequence[str] | None) -> MarketData:
    if tickers is None:
        return data
    wanted = [str(t).strip().upper() for t in tickers]
    have = {str(t).upper(): i for i, t in enumerate(data.tickers)}
    unknown = [t for t in wanted if t not in have]
    if unknown:
        raise DataError(
            f"unknown ticker(s) {', '.join(unknown)}: the market data holds {', '.join(data.tickers)}",
            ticker=unknown[0],
            field="tickers",
        )
    if len(set(wanted)) != len(wanted):
        raise DataError(f"tickers repeat a ticker: {', '.join(wanted)}", field="tickers")
    idx = [have[t] for t in wanted]
    return MarketData(
        dates=data.dates,
        tickers=tuple(data.tickers[i] for i in idx),
        close=data.close[:, idx],
        features=data.features[:, idx, :],
        feature_names=data.feature_names,
        turbulence=data.turbulence,
        notes=data.notes,
        source=data.source,
        members=data.members[:, idx] if data.members is not None else None,
    )


def _day(value, name: str) -> np.datetime64:
    try:
        return np.datetime64(parse_day(value, name), "D")
    except ConfigError as exc:  # a bad backtest range is bad input data here
        raise DataError(exc.message, field=name) from exc


def _select_dates(data: MarketData, start, end) -> MarketData:
    first, last = data.dates[0], data.dates[-1]
    lo = _day(start, "start") if start is not None else first
    hi = _day(end, "end") if end is not None else last
    # compared by day: an intraday window from day a to day b holds every bar of both days
    day = "datetime64[D]"
    if lo.astype(day) < first.astype(day) or hi.astype(day) > last.astype(day):
        raise DataError(
            f"backtest range {lo} to {hi} is outside the market data, which covers {first} to {last}",
            field="start" if lo < first else "end",
            date=str(lo if lo < first else hi),
        )
    window = data if start is None and end is None else data.slice(lo, hi, name="backtest")
    days = int(np.unique(window.dates.astype(day)).size)  # sessions: an intraday day has many bars
    if days < MIN_RANGE_DAYS:  # a Sharpe ratio of one or two returns means nothing
        raise DataError(
            f"backtest range {lo} to {hi} holds {days} trading day(s); at least {MIN_RANGE_DAYS} are needed",
            field="end",
        )
    return window


def agent_metrics(daily: pd.DataFrame, benchmark_returns: pd.Series | None = None) -> dict[str, Any]:
    """Metrics of a policy's account from its daily frame (:attr:`BacktestResult.daily`).

    The one definition behind a backtest's ``agent`` metrics and a generation's validation
    metrics: :func:`~trainer.backtest.metrics.compute_metrics` of the account's daily returns,
    with its turnover (the last day trades nothing) and ``benchmark_returns`` if given.
    """
    return compute_metrics(
        returns_from_values(daily["account_value"]),
        benchmark_returns,
        turnover=daily["turnover"].iloc[:-1],
        start_date=daily.index[0],
    )


#: Bootstrap replications of a backtest's ``vs_equal_weight`` intervals: 1,000 keeps a report's
#: evidence at about 1 s on a year of days (2,000, the CLI's, moves the end points by ~0.01).
BACKTEST_BOOTSTRAP_REPS = 1000

#: A portfolio trade worth at most this fraction of the account is floating-point residue of
#: reconstructing shares from weights (about 1e-16 of the account), not a trade.
TRADE_TOLERANCE = 1e-9


def executed_trades(
    holdings: np.ndarray, close: np.ndarray, value: np.ndarray, costs: np.ndarray, *, costs_from_positions: bool
) -> np.ndarray:
    """Shares traded at each day's close, from the holdings entering each day.

    Args:
        holdings: (T, N) float64 shares entering each day.
        close: (T, N) float64 close prices, USD.
        value: (T,) float64 account value at each close before trading, USD.
        costs: (T,) float64 transaction costs paid at each close, USD.
        costs_from_positions: ``True`` for the portfolio env, which pays its costs out of every
            position pro rata (``V_{t+1} = (V_t - cost) * G``): holdings entering day ``t+1``
            are the post-trade holdings times ``1 - cost_t / V_t``, so the trades are
            ``holdings[t+1] / (1 - cost_t / V_t) - holdings[t]``: ``(w'_i - w_i) V_t / close_t``,
            the weight change the env made (zero where its no-trade band held the weight), and
            ``sum_i |trade_i| close_i = turnover * V_t``, the notional the costs are charged on.
            Trades worth at most :data:`TRADE_TOLERANCE` of the account are rounding and set to
            0. ``False`` (stock trading: whole shares, costs paid from cash): the change of
            holdings.

    Returns:
        (T, N) float64 shares, + bought, - sold; the last row is 0 (the backtest ends at that
        close).
    """
    trades = np.zeros_like(holdings)
    if not costs_from_positions:
        trades[:-1] = np.diff(holdings, axis=0)
        return trades
    kept = 1.0 - costs[:-1] / value[:-1]  # the fraction of each position left after the costs
    trades[:-1] = holdings[1:] / kept[:, None] - holdings[:-1]
    residue = np.abs(trades * close) <= TRADE_TOLERANCE * value[:, None]
    trades[residue] = 0.0
    return trades


def turnover_series(traded_notional: pd.Series, account_value: pd.Series) -> pd.Series:
    """Daily turnover: traded notional of a day divided by the account value that day.

    Args:
        traded_notional: (T,) USD value of all buys plus all sells executed each day (>= 0).
        account_value: (T,) USD account value on the same dates (> 0).

    Returns:
        (T,) float64 fractions (0.1 = a tenth of the account traded that day).

    Raises:
        DataError: the dates differ, a notional is negative or an account value is not positive.
    """
    if not traded_notional.index.equals(account_value.index):
        raise DataError("traded_notional and account_value must have the same dates", field="traded_notional")
    notional = traded_notional.to_numpy(dtype="float64")
    value = account_value.to_numpy(dtype="float64")
    if (notional < 0).any() or not np.isfinite(notional).all():
        raise DataError("traded_notional must be finite and non-negative", field="traded_notional")
    if (value <= 0).any() or not np.isfinite(value).all():
        raise DataError("account_value must be positive and finite", field="account_value")
    return pd.Series(notional / value, index=traded_notional.index, name="turnover")


def daily_frame(trace: PolicyTrace, window: MarketData, *, costs_from_positions: bool = False) -> pd.DataFrame:
    """The daily account of a one-env :func:`~trainer.backtest.policy_run.run_policy` trace.

    Args:
        trace: a trace of one env over every day of ``window`` (``start_day=0``, no random
            start or episode length).
        window: the market data the env traded.
        costs_from_positions: the env pays its costs out of every position (the portfolio env;
            see :func:`executed_trades`).

    Returns:
        DataFrame indexed by date (``DatetimeIndex`` named ``date``): ``account_value``,
        ``cash``, ``holdings_<T>``, ``trades_<T>``, ``traded_value``, ``costs``, ``turnover``
        (see :attr:`BacktestResult.daily`).
    """
    value, cash, holdings, costs = trace.values[0], trace.cash[0], trace.holdings[0], trace.costs[0]
    dates = pd.DatetimeIndex(window.dates.astype("datetime64[ns]"), name="date")
    trades = executed_trades(holdings, window.close, value, costs, costs_from_positions=costs_from_positions)
    traded_value = np.abs(trades * window.close).sum(axis=1)
    # Built from one dict: inserting a column per ticker fragments the frame (pandas warns on
    # every column past about 100, i.e. on a 71-ticker panel).
    weights = holdings * window.close / value[:, None]
    columns = {"account_value": value, "cash": cash}
    columns.update({f"holdings_{tic}": holdings[:, i] for i, tic in enumerate(window.tickers)})
    columns.update({f"trades_{tic}": trades[:, i] for i, tic in enumerate(window.tickers)})
    columns.update({f"weight_{tic}": weights[:, i] for i, tic in enumerate(window.tickers)})
    daily = pd.DataFrame(columns, index=dates)
    daily["traded_value"] = traded_value
    daily["costs"] = costs
    daily["turnover"] = turnover_series(daily["traded_value"], daily["account_value"])
    return daily


def run_backtest(
    policy: Policy,
    data: MarketData,
    env_config: EnvConfig | PortfolioConfig | None = None,
    *,
    benchmark_close: pd.Series | None = None,
    start=None,
    end=None,
    tickers: Sequence[str] | None = None,
    device: str = "cpu",
    feature_stats: FeatureStats | None = None,
    policy_name: str = "the policy",
) -> BacktestResult:
    """Run a deterministic policy day by day from ``start`` to ``end`` and score it.

    Args:
        policy: callable mapping an observation (1, obs_dim) float32 tensor (the layout of
            :meth:`StockTradingVecEnv.observation_layout`) to an action (1, N) in [-1, 1]
            (tensor or array), e.g. ``agent.act``, a bundle's ``LoadedAgent.act`` or
            ``agent.policy_module()``. Called under ``torch.no_grad()``, once per day except
            the last.
        data: market panel; its close is the execution price.
        env_config: trading rules (costs, hmax, initial cash, turbulence threshold) of the
            stock-trading env, or a ``PortfolioConfig`` for a portfolio agent (action: one
            value per ticker, then cash); its ``random_start``, ``episode_length`` and
            ``randomize_initial`` are ignored (the backtest starts on the first day with
            ``initial_cash`` in cash and runs to the end).
        benchmark_close: adjusted close of QQQ (see :func:`load_benchmark_close`) with every
            trading day of the range; extra days are ignored.
        start: first day (``YYYY-MM-DD`` or date), default the first day of ``data``.
        end: last day, inclusive, default the last day of ``data``.
        tickers: the tickers the policy trades, in its action order (e.g. a bundle's
            ``tickers``); selects and orders the columns of ``data``. Default: all of them.
        device: torch device of the env.
        feature_stats: the agent's train-split statistics for a scale-free observation (from
            its checkpoint or bundle); the features are computed over all of ``data`` first,
            so the first backtest day has its full lookback. Default: the policy's own
            ``feature_stats`` attribute (``LoadedAgent.policy_fn`` sets it); without either they are fitted on
            the days of ``data`` before ``start`` (at least :data:`MIN_STATS_DAYS`), else on the
            window itself (a note says so).
        policy_name: who the policy is, for errors (e.g. ``"agent 12"``, a bundle's file name).

    Returns:
        A :class:`BacktestResult`.

    Raises:
        DataError: the range reaches outside the data or holds fewer than
            :data:`~trainer.data.splits.MIN_RANGE_DAYS` (20) trading days (field ``end``), a ticker is
            not in ``data``, or ``benchmark_close`` lacks a trading day of the range (the
            message lists them) or has a non-positive price.
        ConfigError: invalid ``env_config``, or the policy returns an action of the wrong shape.
        PolicyError: the policy returns a NaN or infinite action (a diverged agent; it is
            refused, never run as "hold"); the message names ``policy_name`` and the day.
    """
    config = env_config or EnvConfig()
    names = {f.name for f in dataclasses.fields(config)}
    fixed = {"random_start": False, "episode_length": None, "randomize_initial": False}
    config = dataclasses.replace(config, **{k: v for k, v in fixed.items() if k in names})
    config.validate()
    if feature_stats is None:  # a bundle's policy_fn carries its agent's statistics
        feature_stats = getattr(policy, "feature_stats", None)
    prepared = prepare_market(_select_tickers(data, tickers), config)
    window = _select_dates(prepared, start, end)
    aligned = align_benchmark(benchmark_close, window.dates) if benchmark_close is not None else None
    notes: list[str] = []
    if feature_stats is None and uses_scale_free(config):
        # No agent statistics: use the days before the window (no look-ahead) when there are
        # enough, else the window itself, and say so.
        before = prepared.dates < window.dates[0]
        if before.sum() >= MIN_STATS_DAYS:
            feature_stats = fit_feature_stats(prepared.slice(None, prepared.dates[before][-1]))
        else:
            feature_stats = fit_feature_stats(window)
            notes.append("observation statistics fitted on the backtest window itself (no agent statistics given)")

    env = make_env(window, config, num_envs=1, device=device, seed=0, feature_stats=feature_stats)
    trace = run_policy(policy, env, start_day=0, seed=0, policy_name=policy_name)
    daily = daily_frame(trace, window, costs_from_positions=isinstance(config, PortfolioConfig))
    dates, n = daily.index, window.num_stocks

    capital = float(config.initial_cash)
    benchmarks = pd.DataFrame(index=dates)
    # Equal weight: capital / N in each ticker at the first close, fractional shares, no costs;
    # over a point-in-time universe, 1/N of each day's members (rebalanced daily, no costs).
    if window.members is None:
        benchmarks[EQUAL_WEIGHT] = capital * (window.close / window.close[0]).mean(axis=1)
    else:
        growth = np.cumprod(1.0 + equal_weight_returns(window.close, window.members))
        benchmarks[EQUAL_WEIGHT] = capital * np.concatenate([[1.0], growth])
        notes.append("equal weight: 1/N of each day's index members, rebalanced daily, no costs")
    if aligned is not None:
        benchmarks[QQQ] = capital * aligned.close / aligned.close[0]
        notes.append(aligned.note)
    metrics = _score(daily, benchmarks, aligned)
    metrics.update(
        _evidence(policy, window, config, daily, device=device, feature_stats=feature_stats, policy_name=policy_name)
    )
    days = len(np.unique(window.dates.astype("datetime64[D]")))
    rows = f"{window.num_days:,} bars on {days} trading days" if days != window.num_days else f"{days} trading days"
    notes = [f"{rows}, {n} tickers, {window.dates[0]} to {window.dates[-1]}", *notes]
    return BacktestResult(
        daily=daily,
        benchmarks=benchmarks,
        metrics=metrics,
        actions=pd.DataFrame(
            trace.actions[0],
            index=dates[:-1],
            columns=list(window.tickers) + (["cash"] if env.action_dim > n else []),
        ),
        tickers=tuple(window.tickers),
        env_config=config,
        notes=notes,
        benchmark_basis=aligned.basis if aligned is not None else "",
    )


def _evidence(policy: Policy, window: MarketData, config: Any, daily: pd.DataFrame, **kwargs: Any) -> dict[str, Any]:
    """The statistics against both 1/N (``vs_equal_weight``, ``vs_equal_weight_with_costs``:
    :func:`~trainer.backtest.equal_weight.equal_weight_comparison`, with
    :data:`BACKTEST_BOOTSTRAP_REPS` replications) and the ``robustness`` checks
    (:func:`~trainer.backtest.robustness.robustness_report`) of a backtest."""
    periods = infer_periods_per_year(window.dates)
    values = daily["account_value"].to_numpy(dtype=np.float64)
    out = equal_weight_comparison(
        values[1:] / values[:-1] - 1.0,
        window,
        config,
        periods_per_year=periods,
        reps=BACKTEST_BOOTSTRAP_REPS,
        device=kwargs["device"],
        feature_stats=kwargs["feature_stats"],
    )
    out["robustness"] = robustness_report(policy, window, config, daily, periods_per_year=periods, **kwargs)
    return out


def _relative(values: pd.Series, bench: pd.Series) -> dict[str, Any]:
    keys = ("alpha", "beta", "information_ratio", "benchmark_cumulative_return")
    scored = compute_metrics(returns_from_values(values), bench, start_date=values.index[0])
    return {k: scored[k] for k in keys} | {"relative_basis": "session_closes"}


def _score(daily: pd.DataFrame, benchmarks: pd.DataFrame, aligned: AlignedBenchmark | None) -> dict[str, Any]:
    """Metrics of the agent and each benchmark; on the ``"session_closes"`` basis the agent's
    and equal weight's own figures use every bar and their QQQ-relative ones (alpha, beta,
    information ratio) the session closes, as QQQ's own figures do."""
    start = daily.index[0]
    if aligned is None or aligned.basis != "session_closes":
        bench = returns_from_values(benchmarks[QQQ]) if aligned is not None else None
        metrics = {AGENT: agent_metrics(daily, bench)}
        for name in benchmarks.columns:
            metrics[name] = compute_metrics(returns_from_values(benchmarks[name]), bench, start_date=start)
        return metrics
    at_close = benchmarks.iloc[aligned.rows]
    bench = returns_from_values(at_close[QQQ])
    metrics = {AGENT: agent_metrics(daily) | _relative(daily["account_value"].iloc[aligned.rows], bench)}
    metrics[EQUAL_WEIGHT] = compute_metrics(returns_from_values(benchmarks[EQUAL_WEIGHT]), start_date=start)
    metrics[EQUAL_WEIGHT] |= _relative(at_close[EQUAL_WEIGHT], bench)
    metrics[QQQ] = compute_metrics(bench, bench, start_date=at_close.index[0]) | {"relative_basis": "session_closes"}
    return metrics
