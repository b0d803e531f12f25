"""The answer to an act request body: actions for observations, or for a market state the
observation it builds, the action and the orders under the env's trade rule (stock trading
here, portfolio agents in :mod:`trainer.serving.portfolio`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from trainer.errors import DataError, TrainerError
from trainer.serving.bodies import (
    BARS_TOLERANCE,
    bars_panel,
    cash_of,
    checked_moment,
    dataset_row,
    holdings_of,
    min_bars_days,
    min_history_days,
    parse_observations,
    portfolio_value,
)
from trainer.serving.policy import ServedPolicy
from trainer.serving.portfolio import portfolio_answer, portfolio_state

MarketLoader = Callable[[], Any]


def _trade(
    policy: ServedPolicy,
    action: np.ndarray,
    close: np.ndarray,
    cash: float,
    holdings: np.ndarray,
    turbulent: bool,
    members: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Orders of one step under the env's trade rule (see ``StockTradingVecEnv``); ``members``
    (N,) bool, the day's index members of a point-in-time universe (a non-member is sold, never
    bought), or ``None``."""
    env = policy.config["env_config"]
    hmax, buy_cost, sell_cost = int(env["hmax"]), float(env["buy_cost_pct"]), float(env["sell_cost_pct"])
    act = np.nan_to_num(action.astype(np.float32), nan=0.0)
    shares = np.trunc(np.clip(act, -1.0, 1.0) * np.float32(hmax)).astype(np.float64)
    sells = np.clip(np.minimum(-shares, holdings), 0.0, None)
    buys = np.clip(shares, 0.0, None)
    if turbulent:
        sells, buys = holdings.copy(), np.zeros_like(buys)
    if members is not None:
        sells, buys = np.where(members, sells, holdings), np.where(members, buys, 0.0)
    cash_after_sells = cash + float(sells @ close) * (1.0 - sell_cost)
    buy_cost_total = float(buys @ close) * (1.0 + buy_cost)
    if buy_cost_total > cash_after_sells:
        buys = np.floor(buys * (cash_after_sells / buy_cost_total * (1.0 - 1e-12)))
    orders = []
    for i, t in enumerate(policy.tickers):
        qty = float(buys[i] - sells[i])
        orders.append({
            "ticker": t,
            "action": float(action[i]),
            "shares": int(qty),
            "side": "buy" if qty > 0 else "sell" if qty < 0 else "hold",
            "price": float(close[i]),
            "value": float(qty * close[i]),
        })  # fmt: skip
    return orders


def _env_panel(policy: ServedPolicy, market: Any, env_config: Any) -> Any:
    """The panel the agent's env reads (scale-free features over the whole history when the agent
    uses them), kept for the last dataset so ``date`` requests compute it once."""
    from trainer.envs.kinds import prepare_market

    if policy.prepared is not None and policy.prepared[0] is market:
        return policy.prepared[1]
    panel = prepare_market(market, env_config)
    policy.prepared = (market, panel)
    return panel


def _label(dates: np.ndarray, t: int) -> str:
    intraday = np.asarray(dates).dtype != np.dtype("datetime64[D]")
    return str(dates[t]).replace("T", " ")[:16] if intraday else str(dates[t])[:10]


def warmup_warnings(policy: ServedPolicy, dates: np.ndarray, t: int, need: int) -> list[str]:
    """Warnings for a ``date`` request on row ``t`` of the agent's dataset, or a refusal.

    The first ``need - 1`` rows (:func:`~trainer.serving.bodies.min_history_days`) are the
    dataset's warm-up: their log returns, volatility and indicators are computed over
    shortened windows. The agent's train split starts on the dataset's first day in the usual
    task, so its training episodes (random starts from day 0) and its z-score statistics
    include such rows; a warm-up row inside the train split is therefore served, with a
    warning. A warm-up row outside it (a train split starting later) is an observation the
    agent never met: refused.

    Returns:
        ``[]`` for a row with full history, else one warning naming the first full day.

    Raises:
        DataError: naming ``date``, a warm-up row outside the train split; the message names
            the first day that can be served.
    """
    if t >= need - 1 or need - 1 >= len(dates):
        return []
    unit = "trading days" if np.asarray(dates).dtype == np.dtype("datetime64[D]") else "bars"
    day, first_full = _label(dates, t), _label(dates, need - 1)
    train = (policy.config.get("task") or {}).get("train") or {}
    start, end = train.get("start"), train.get("end")
    in_train = (start is None or day[:10] >= str(start)[:10]) and (end is None or day[:10] <= str(end)[:10])
    what = (
        f"{day} is within the first {need - 1} {unit} of the agent's dataset (which starts "
        f"{_label(dates, 0)}): its features use {t + 1} {unit} of history, fewer than the {need} they need"
    )
    if not in_train:
        raise DataError(
            f"date {what}, and it is outside the agent's train split, so the agent never saw such an "
            f"observation; the first day that can be served is {first_full}",
            field="date",
        )
    return [
        f"{what}; they are computed over shortened windows, as in the agent's training episodes that "
        f"start on the dataset's first days. The first day with full history is {first_full}."
    ]


def _market_state(policy: ServedPolicy, body: Mapping[str, Any], load_market: MarketLoader | None) -> dict[str, Any]:
    from trainer.data.indicators import DEFAULT_INDICATORS
    from trainer.data.pipeline import build_market_data
    from trainer.envs.kinds import env_config_from_dict, uses_risk_features, uses_scale_free

    tickers = policy.tickers
    env = policy.config["env_config"]
    env_config = env_config_from_dict(policy.kind, env)
    task_data = (policy.config.get("task") or {}).get("data") or {}
    raw_indicators = list(task_data.get("indicators") or DEFAULT_INDICATORS)
    portfolio = policy.kind == "portfolio"
    if portfolio:
        state = portfolio_state(body, tickers, env["initial_cash"])
    else:
        cash = cash_of(body, env["initial_cash"])
        holdings = holdings_of(body, tickers)
    if "date" in body:
        requested = checked_moment(body["date"], "date")
        if load_market is None:
            raise DataError("this server has no market data; start it with --data-dir, or send bars", field="date")
        market = _env_panel(policy, load_market(), env_config)
        t, day = dataset_row(market.dates, requested, "date")
        need = min_history_days(
            raw_indicators, scale_free=uses_scale_free(env_config), risk=uses_risk_features(env_config)
        )
        warnings = warmup_warnings(policy, market.dates, t, need)
    else:
        warnings = []
        need = min_bars_days(
            raw_indicators, scale_free=uses_scale_free(env_config), risk=uses_risk_features(env_config)
        )
        panel = bars_panel(body["bars"], tickers, need)
        try:
            market = build_market_data(
                panel, tickers=tickers, indicators=raw_indicators, turbulence=True,
                missing_policy=task_data.get("missing_policy", "drop"), source="request bars",
            )  # fmt: skip
        except TrainerError as exc:
            raise DataError(
                exc.message, field="bars", **{k: v for k, v in exc.details.items() if k != "field"}
            ) from None
        if len(market.dates) < need:
            raise DataError(
                f"bars cover {len(market.dates)} common days; send at least {need} days of history (the agent's "
                f"indicators need them to match the dataset's observation within {BARS_TOLERANCE:g})",
                field="bars",
            )
        market = _env_panel(policy, market, env_config)
        t = len(market.dates) - 1
        day = str(market.dates[t])[:10]
    if list(market.tickers) != tickers or list(market.feature_names) != list(policy.config["indicators"]):
        raise DataError(
            f"the market data (tickers {list(market.tickers)}, features {list(market.feature_names)}) differs from the "
            f"agent's (tickers {tickers}, features {list(policy.config['indicators'])})",
            field="data",
        )
    out = _state_answer(policy, env_config, state if portfolio else (cash, holdings), market, t, day)
    if warnings:
        out["warnings"] = warnings
    return out


def _state_answer(policy: ServedPolicy, env_config: Any, state: Any, market: Any, t: int, day: str) -> dict[str, Any]:
    """The answer on row ``t`` of ``market``: a portfolio agent's, or a stock-trading agent's
    (``state`` is ``(cash, holdings)``) with its orders under the env's trade rule."""
    from trainer.envs.stock_layout import build_observation

    env, tickers = policy.config["env_config"], policy.tickers
    if policy.kind == "portfolio":
        return portfolio_answer(policy, env_config, state, market, t, day)
    cash, holdings = state
    close = np.asarray(market.close[t], dtype=np.float64)
    if portfolio_value(cash, holdings, close, tickers) <= 0:
        raise DataError("cash and holdings are worth nothing; send cash > 0 or some holdings", field="cash")
    features = np.asarray(market.features[t], dtype=np.float64)  # (N, F)
    with np.errstate(over="ignore", invalid="ignore"):  # a raw cash block beyond float32: refused by answer()
        obs = build_observation(policy.config["observation_layout"], cash, holdings, close, features)
    action = policy.act(obs[None])[0]
    threshold = env.get("turbulence_threshold")
    turbulent = threshold is not None and float(market.turbulence[t]) >= float(threshold)
    return {
        "date": day,
        "action": action.tolist(),
        "orders": _trade(
            policy, action, close, cash, holdings, turbulent, None if market.members is None else market.members[t]
        ),
        "prices": dict(zip(tickers, close.tolist())),
        "cash": cash,
        "holdings": dict(zip(tickers, holdings.tolist())),
        "turbulent": turbulent,
        "observation": obs.tolist(),
    }


def first_nonfinite_number(value: Any, path: str = "") -> tuple[str, float] | None:
    """``(path, number)`` of the first NaN or infinite float in nested dicts and lists
    (``orders[1].value``), found without recursion; ``None`` when all are finite."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return where, item
        elif isinstance(item, Mapping):
            stack.extend(reversed([(v, f"{where}.{k}" if where else str(k)) for k, v in item.items()]))
        elif isinstance(item, list | tuple):
            stack.extend(reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)]))
    return None


def _blame(policy: ServedPolicy, body: Mapping[str, Any], form: str, path: str) -> str:
    """The request field a non-finite number of a market state's answer at ``path`` comes
    from: the observation's cash or holdings block, else the portfolio the request gave
    (``cash``, ``holdings``, ``weights``), else its market state (``date``, ``bars``)."""
    if path.startswith("observation["):
        k = int(path[len("observation[") : -1])
        for block in policy.config["observation_layout"]["blocks"]:
            if block["offset"] <= k < block["offset"] + block["size"]:
                if block["name"] == "cash" and "cash" in body:
                    return "cash"
                if block["name"] == "holdings" and k - block["offset"] < len(policy.tickers):
                    ticker = policy.tickers[k - block["offset"]]
                    if ticker in (body.get("holdings") or {}):
                        return f"holdings.{ticker}"
    given = [k for k in ("cash", "holdings", "weights") if k in body]
    return given[0] if given else form


def finite_answer(policy: ServedPolicy, body: Mapping[str, Any], form: str, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` when every number in it is finite (JSON has no NaN or infinity), else a refusal
    naming the request field responsible (:func:`_blame`): the last check before an answer
    is written, whatever step of it overflowed.

    Raises:
        DataError: a NaN or infinite number in ``out`` (the observation is looked at first).
    """
    found = first_nonfinite_number(out.get("observation", []), "observation") or first_nonfinite_number(out)
    if found is None:
        return out
    path, value = found
    field = _blame(policy, body, form, path)
    raise DataError(
        f"{field}: the policy's answer is not finite for these values ({path} would be {value}); "
        "send smaller magnitudes",
        field=field,
    )


def checked_actions(actions: np.ndarray) -> np.ndarray:
    """``actions`` (B, action_dim) of an observation batch, when all are finite.

    Raises:
        DataError: (``observations``, ``row`` the first) rows whose actions are NaN or infinite.
    """
    bad = np.flatnonzero(~np.isfinite(actions).all(axis=1))
    if bad.size:
        rows = ", ".join(f"observations[{i}]" for i in bad[:8]) + (f" and {bad.size - 8} more" if bad.size > 8 else "")
        raise DataError(
            f"observations: the policy's answer is not finite for these values ({rows}); send smaller magnitudes",
            field="observations",
            row=int(bad[0]),
        )
    return actions


def shown_key(key: str) -> str:
    """A body key as an error names it: at most 40 characters."""
    return key if len(key) <= 40 else key[:40] + "..."


def answer(policy: ServedPolicy, body: Any, *, load_market: MarketLoader | None = None) -> dict[str, Any]:
    """The JSON answer to one act request (see the module doc for both forms).

    Args:
        policy: the agent's loaded policy.
        body: the decoded JSON body.
        load_market: returns the agent's dataset as ``MarketData`` (needed for ``date``).

    Returns:
        For observations: ``{"algorithm", "actions": (B, action_dim)}``; for a market state of
        a stock-trading agent: ``{"algorithm", "date", "action", "orders", "prices", "cash",
        "holdings", "turbulent", "observation"}``; of a portfolio agent: ``{"algorithm",
        "date", "action", "weights", "target_weights", ...}``
        (:func:`~trainer.serving.portfolio.portfolio_answer`). A ``date`` in the dataset's
        warm-up adds ``"warnings"`` (:func:`warmup_warnings`).

    Raises:
        DataError: a bad body, naming the field; also one whose answer would hold a NaN or
            infinite number (:func:`finite_answer`), naming the field responsible.
    """
    if not isinstance(body, Mapping):
        raise DataError("the request body must be a JSON object", field="body")
    forms = [k for k in ("observations", "date", "bars") if k in body]
    if len(forms) != 1:
        raise DataError(
            "send exactly one of observations (a batch), date (a dataset day) or bars (recent daily bars)",
            field="observations" if not forms else forms[1],
        )
    taken = {"observations"} if forms[0] == "observations" else {forms[0], "cash", "holdings"}
    if forms[0] != "observations" and policy.kind == "portfolio":
        taken.add("weights")
    unknown = [str(k) for k in body if k not in taken]
    if unknown:  # a misspelt "holdings" would otherwise answer for an empty portfolio
        raise DataError(
            f"{shown_key(unknown[0])}: unknown field of an act request by {forms[0]} (it takes {', '.join(sorted(taken))})",
            field=shown_key(unknown[0]),
        )
    if forms[0] == "observations":
        obs = parse_observations(body["observations"], policy.obs_dim)
        return {"algorithm": policy.config["algorithm"], "actions": checked_actions(policy.act(obs)).tolist()}
    out = {"algorithm": policy.config["algorithm"], **_market_state(policy, body, load_market)}
    return finite_answer(policy, body, forms[0], out)
