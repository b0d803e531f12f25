"""One generation of a pod: (task, parent checkpoint?) -> trained agent, validation score, checkpoint.

In the tournament-based ensemble of ElegantRL-Podracer (Li et al. 2021, arXiv 2112.05923,
section 3), each pod repeatedly trains an agent for one *generation* on many vectorized envs,
evaluates it and submits it to a leaderboard; the next generation starts from an agent picked
from the leaderboard (:mod:`trainer.tournament`), maybe with perturbed hyperparameters.
:func:`run_generation` is that unit of work; it knows nothing of the leaderboard or the web.

A :class:`TaskSpec` fixes what is learned: the market data, three consecutive date splits
(train < validation < test, no overlap), the trading rules and the algorithm with its
hyperparameters. Training uses only the train split; the score uses only the validation
split; the test split is left untouched for backtests.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from trainer import __version__
from trainer.agents import ALGORITHMS, OFF_POLICY, make_agent
from trainer.backtest.metrics import compute_metrics
from trainer.bundle import load_checkpoint, save_checkpoint, sha256_file, utc_now
from trainer.data.market import MarketData
from trainer.data.pipeline import DataSpec, load_market_data
from trainer.data.splits import MIN_SPLIT_DAYS, check_split_days
from trainer.device import buffer_memory_limit, configure_device, pick_device
from trainer.envs.kinds import (
    DEFAULT_KIND,
    check_kind,
    env_config_from_dict,
    fit_stats,
    kind_of,
    make_env,
    observation_dim,
    prepare_market,
)
from trainer.envs.observations import FeatureStats
from trainer.envs.stock_trading import EnvConfig
from trainer.errors import BundleError, ConfigError, PolicyError
from trainer.nonfinite import check_policy_actions, labelled
from trainer.selection import SelectionRule, baseline_relative, equal_weight_returns, robust_score, window_bounds

__all__ = [
    "DEMO_DATA_FILE",
    "MAX_BUFFER_BYTES",
    "MIN_SPLIT_DAYS",
    "SPLITS",
    "GenerationResult",
    "TaskSpec",
    "buffer_bytes",
    "check_env_steps",
    "demo_task_dict",
    "evaluate_checkpoint_state",
    "evaluate_policy",
    "min_env_steps",
    "run_generation",
]

SPLITS = ("train", "validation", "test")
#: File of the demo task, relative to the data folder (``../shared/data``).
DEMO_DATA_FILE = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
#: Random-start validation windows evaluated besides the full window, and their length in
#: trading days (one quarter). They show whether the score depends on the start day.
EVAL_RANDOM_WINDOWS = 4
EVAL_WINDOW_DAYS = 63
#: Largest rollout (PPO) or replay (SAC) buffer any task may ask for: 48 GiB, a third of the
#: largest GPUs (141 GB). Checked with :func:`buffer_bytes` when the task is created and the
#: observation size is known (the task names its tickers); the pod then checks the buffer
#: against the memory of the device it trains on (``trainer.device.buffer_memory_limit``: a
#: third of a GPU, a quarter of the CPU machine's RAM).
MAX_BUFFER_BYTES = 48 * 2**30

Policy = Callable[[torch.Tensor], torch.Tensor]
"""obs (B, obs_dim) float32 -> action (B, action_dim) float32 in [-1, 1], same device."""


def demo_task_dict() -> dict[str, Any]:
    """The built-in demo task: Dow-30, train 2010-2019, validate 2020, test 2021-01-01..2022-11-15, PPO.

    ``data.paths`` is relative: pass the data folder (``../shared/data``) as ``data_dir``. The
    data range starts with the train split; indicators of the first days are computed from the
    rows available (the file starts 2010-01-04). DOW (listed 2019-03-20) is dropped by the
    default missing-data policy, leaving 29 tickers.

    Returns:
        A fresh dict accepted by :meth:`TaskSpec.from_dict` (callers may edit it).
    """
    return {
        "data": {"paths": [DEMO_DATA_FILE], "start": "2010-01-01", "end": "2022-11-15"},
        "train": {"start": "2010-01-01", "end": "2019-12-31"},
        "validation": {"start": "2020-01-01", "end": "2020-12-31"},
        "test": {"start": "2021-01-01", "end": "2022-11-15"},
        "env": {},
        "algorithm": "ppo",
        "hyperparameters": {},
    }


# ---------------------------------------------------------------------------- task spec
def _reprefix(exc: ConfigError, prefix: str, inner: str | None = None) -> ConfigError:
    """Return a copy of ``exc`` whose field path lives under ``prefix``.

    Args:
        exc: the error raised by a nested config class.
        prefix: e.g. ``"hyperparameters"``.
        inner: the nested class's own prefix to swap out (e.g. ``"ppo"`` for ``ppo.lr``).
    """
    name = str(exc.details.get("field") or "")
    message = exc.message
    if inner and (name == inner or name.startswith(inner + ".")):
        rest = name[len(inner) :].lstrip(".")
        new = f"{prefix}.{rest}" if rest else prefix
        message = message.replace(name, new, 1) if name in message else f"{new}: {message}"
    elif name == prefix or name.startswith(prefix + "."):
        return exc
    else:
        new = f"{prefix}.{name}" if name else prefix
        message = message.replace(name, new, 1) if name and name in message else f"{new}: {message}"
    return ConfigError(message, **{**exc.details, "field": new})


def _parse_day(value: Any, name: str) -> str:
    if isinstance(value, date):
        value = value.isoformat()[:10]
    if not isinstance(value, str):
        raise ConfigError(f"{name}: {value!r} is not a YYYY-MM-DD date", field=name)
    try:
        parsed = date.fromisoformat(value.strip())
    except ValueError as exc:
        raise ConfigError(f"{name}: {value!r} is not a YYYY-MM-DD date", field=name) from exc
    if len(value.strip()) != 10:
        raise ConfigError(f"{name}: {value!r} is not a YYYY-MM-DD date", field=name)
    return parsed.isoformat()


def _parse_range(value: Any, name: str) -> tuple[str, str]:
    """Accept ``{"start": a, "end": b}`` or ``[a, b]``; return ``(a, b)`` validated, a <= b."""
    if isinstance(value, Mapping):
        unknown = set(value) - {"start", "end"}
        if unknown:
            key = sorted(unknown)[0]
            raise ConfigError(f"{name}.{key}: unknown field (expected start and end)", field=f"{name}.{key}")
        for key in ("start", "end"):
            if key not in value:
                raise ConfigError(f"{name}.{key} is required", field=f"{name}.{key}")
        start, end = value["start"], value["end"]
    elif isinstance(value, list | tuple) and len(value) == 2:
        start, end = value
    else:
        raise ConfigError(f"{name} must be {{start: YYYY-MM-DD, end: YYYY-MM-DD}}, got {value!r}", field=name)
    start = _parse_day(start, f"{name}.start")
    end = _parse_day(end, f"{name}.end")
    if start > end:
        raise ConfigError(f"{name}.end: {end} is before {name}.start {start}", field=f"{name}.end")
    return start, end


@dataclass
class TaskSpec:
    """What a run learns: data, date splits, trading rules, algorithm and hyperparameters.

    Build it with :meth:`from_dict`, which validates everything; the constructor does not.

    Attributes:
        data: which files/tickers/indicators (see :class:`trainer.data.pipeline.DataSpec`).
        train: ``(start, end)`` ``YYYY-MM-DD`` inclusive; the agent learns on these days only.
        validation: ``(start, end)`` after ``train``; generations are scored on it.
        test: ``(start, end)`` after ``validation``; kept for backtests.
        env: rules of the env: an :class:`EnvConfig` (``kind="stock_trading"``) or a
            :class:`~trainer.envs.portfolio.PortfolioConfig` (``kind="portfolio"``).
        algorithm: a key of :data:`trainer.agents.ALGORITHMS` (``"ppo"``, ``"a2c"``, ``"sac"``,
            ``"td3"``, ``"ddpg"``).
        hyperparameters: the algorithm config's full dict (every field, defaults filled in),
            including ``num_envs`` and ``hidden_sizes``.
        kind: ``"stock_trading"`` or ``"portfolio"`` (:mod:`trainer.envs.kinds`).
        selection: how validation episodes are scored (:class:`trainer.selection.SelectionRule`).
    """

    data: DataSpec
    train: tuple[str, str]
    validation: tuple[str, str]
    test: tuple[str, str]
    env: EnvConfig = field(default_factory=EnvConfig)
    algorithm: str = "ppo"
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    kind: str = DEFAULT_KIND
    selection: SelectionRule = field(default_factory=SelectionRule)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSpec:
        """Validate a JSON/YAML task and build the spec.

        Args:
            data: keys ``data`` (DataSpec dict, required), ``train``, ``validation``, ``test``
                (each ``{start, end}`` or ``[start, end]``, required), ``env`` (EnvConfig dict,
                default ``{}``), ``algorithm`` (default ``"ppo"``), ``hyperparameters``
                (default ``{}``), ``kind`` (default ``"stock_trading"``; ``env`` is read with the
                kind's config class), ``selection`` (a :class:`SelectionRule` dict, default
                mean - 1 x std of 4 sub-window Sharpe ratios).

        Raises:
            ConfigError: the first problem found, with ``details["field"]`` a dotted path such
                as ``"data.paths"``, ``"validation.start"``, ``"env.hmax"``,
                ``"hyperparameters.learning_rate"``; also when splits overlap or are out of
                order (train < validation < test), or lie outside ``data.start``/``data.end``;
                also when ``data.tickers`` is given and the agent's buffer would need more than
                :data:`MAX_BUFFER_BYTES` (:func:`check_buffer_memory`). Whether the splits hold
                enough trading days is checked when the data is loaded (:func:`run_generation`).
        """
        if not isinstance(data, Mapping):
            raise ConfigError("task must be an object", field="task")
        known = ("data", "train", "validation", "test", "env", "algorithm", "hyperparameters", "kind", "selection")
        for key in data:
            if key not in known:
                raise ConfigError(f"{key}: unknown task field (expected one of {', '.join(known)})", field=str(key))
        for key in ("data", *SPLITS):
            if key not in data or data[key] is None:
                raise ConfigError(f"{key} is required", field=key)
        try:
            spec = DataSpec.from_dict(
                dict(data["data"]) if isinstance(data["data"], Mapping) else data["data"], prefix="data"
            )
        except ConfigError as exc:
            raise _reprefix(exc, "data") from None
        ranges = {name: _parse_range(data[name], name) for name in SPLITS}
        for earlier, later in (("train", "validation"), ("validation", "test")):
            if ranges[later][0] <= ranges[earlier][1]:
                raise ConfigError(
                    f"{later}.start: {ranges[later][0]} must be after {earlier}.end {ranges[earlier][1]} "
                    f"(splits are consecutive and do not overlap)",
                    field=f"{later}.start",
                )
        if spec.start and ranges["train"][0] < spec.start:
            raise ConfigError(
                f"train.start: {ranges['train'][0]} is before data.start {spec.start}", field="train.start"
            )
        if spec.end and ranges["test"][1] > spec.end:
            raise ConfigError(f"test.end: {ranges['test'][1]} is after data.end {spec.end}", field="test.end")
        # Missing-data decisions (late listings, early ends, gaps) are judged against the
        # task's own range, train.start to test.end, never against the files' first row.
        spec.start = spec.start or ranges["train"][0]
        spec.end = spec.end or ranges["test"][1]
        kind = check_kind(data.get("kind") or DEFAULT_KIND)
        selection = SelectionRule.from_dict(data.get("selection"))
        try:
            env = env_config_from_dict(kind, data.get("env"), prefix="env")
        except ConfigError as exc:
            raise _reprefix(exc, "env") from None
        except TypeError as exc:  # e.g. a non-string key
            raise ConfigError(f"env: {exc}", field="env") from None
        algorithm = data.get("algorithm", "ppo")
        if not isinstance(algorithm, str) or algorithm.strip().lower() not in ALGORITHMS:
            raise ConfigError(
                f"algorithm: {algorithm!r} is not one of {', '.join(sorted(ALGORITHMS))}", field="algorithm"
            )
        algorithm = algorithm.strip().lower()
        hyperparameters = validate_hyperparameters(algorithm, data.get("hyperparameters") or {})
        if spec.tickers is not None:  # else the observation size is known once the data is loaded
            n = len(spec.tickers)
            obs_dim, action_dim = observation_dim(env, n, len(spec.indicators))
            check_buffer_memory(algorithm, hyperparameters, obs_dim, action_dim)
        return cls(
            data=spec,
            train=ranges["train"],
            validation=ranges["validation"],
            test=ranges["test"],
            env=env,
            algorithm=algorithm,
            hyperparameters=hyperparameters,
            kind=kind,
            selection=selection,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict that :meth:`from_dict` accepts (splits as ``{start, end}``)."""
        out: dict[str, Any] = {"data": self.data.to_dict()}
        for name in SPLITS:
            start, end = getattr(self, name)
            out[name] = {"start": start, "end": end}
        out["env"] = self.env.to_dict()
        out["algorithm"] = self.algorithm
        out["hyperparameters"] = copy.deepcopy(self.hyperparameters)
        out["kind"] = self.kind
        out["selection"] = self.selection.to_dict()
        return out

    def split(self, name: str) -> tuple[str, str]:
        """``(start, end)`` of ``"train"``, ``"validation"`` or ``"test"``.

        Raises:
            ConfigError: an unknown split name (field ``split``).
        """
        if name not in SPLITS:
            raise ConfigError(f"split: {name!r} is not one of {', '.join(SPLITS)}", field="split")
        return getattr(self, name)


def validate_hyperparameters(algorithm: str, hyperparameters: Any) -> dict[str, Any]:
    """Validate hyperparameters with the algorithm's config class; return its full dict.

    Raises:
        ConfigError: unknown key or bad value, field ``"hyperparameters.<key>"``; unknown
            algorithm, field ``"algorithm"``.
    """
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm: {algorithm!r} is not one of {', '.join(sorted(ALGORITHMS))}", field="algorithm")
    config_cls = ALGORITHMS[algorithm][1]
    if not isinstance(hyperparameters, Mapping):
        raise ConfigError("hyperparameters must be an object", field="hyperparameters")
    try:
        return config_cls.from_dict(dict(hyperparameters)).to_dict()
    except ConfigError as exc:
        raise _reprefix(exc, "hyperparameters", inner=algorithm) from None


def observation_size(num_tickers: int, num_features: int) -> int:
    """``obs_dim`` of :class:`StockTradingVecEnv`: cash, N prices, N holdings, N x F indicators."""
    return 1 + 2 * num_tickers + num_tickers * num_features


def buffer_bytes(algorithm: str, hyperparameters: Mapping[str, Any], obs_dim: int, action_dim: int) -> int:
    """Bytes of the agent's largest allocation: an on-policy rollout buffer or a replay buffer.

    PPO and A2C store ``rollout_steps x num_envs`` transitions of obs, action and 8 float32
    scalars (log-prob, reward, value, final value, episode return, advantage, return, done
    flags); SAC, TD3 and DDPG (:data:`trainer.agents.OFF_POLICY`) store ``buffer_size``
    transitions of obs, next obs, action, reward and done (see :mod:`trainer.buffers`).
    Networks and activations come on top.

    Args:
        algorithm: a key of :data:`trainer.agents.ALGORITHMS`.
        hyperparameters: the algorithm's validated hyperparameter dict.
        obs_dim, action_dim: sizes of the env's observation and action vectors.
    """
    hp = hyperparameters
    if algorithm in OFF_POLICY:
        return int(hp["buffer_size"]) * (2 * obs_dim + action_dim + 2) * 4
    return int(hp["rollout_steps"]) * int(hp["num_envs"]) * (obs_dim + action_dim + 8) * 4


def check_buffer_memory(
    algorithm: str,
    hyperparameters: Mapping[str, Any],
    obs_dim: int,
    action_dim: int,
    *,
    limit: int | None = None,
) -> None:
    """Refuse hyperparameters whose buffer (:func:`buffer_bytes`) exceeds the limit.

    Args:
        limit: bytes allowed; default :data:`MAX_BUFFER_BYTES` (any device). A pod passes its
            device's :func:`trainer.device.buffer_memory_limit`.

    Raises:
        ConfigError: naming ``hyperparameters.buffer_size`` (off-policy) or ``hyperparameters.num_envs``
            (PPO, A2C: the buffer is ``rollout_steps x num_envs`` transitions).
    """
    size = buffer_bytes(algorithm, hyperparameters, obs_dim, action_dim)
    cap_bytes = min(MAX_BUFFER_BYTES, limit) if limit is not None else MAX_BUFFER_BYTES
    if size <= cap_bytes:
        return
    gib, cap = size / 2**30, round(cap_bytes / 2**30, 1)
    if algorithm in OFF_POLICY:
        raise ConfigError(
            f"hyperparameters.buffer_size: a replay buffer of {hyperparameters['buffer_size']} transitions of "
            f"{obs_dim}-dim observations needs {gib:.1f} GiB, more than the {cap:g} GiB allowed; make it smaller",
            field="hyperparameters.buffer_size",
        )
    raise ConfigError(
        f"hyperparameters.num_envs: a rollout of rollout_steps x num_envs = {hyperparameters['rollout_steps']} x "
        f"{hyperparameters['num_envs']} transitions of {obs_dim}-dim observations needs {gib:.1f} GiB, more than "
        f"the {cap:g} GiB allowed; lower num_envs or rollout_steps",
        field="hyperparameters.num_envs",
    )


def min_env_steps(algorithm: str, hyperparameters: Mapping[str, Any]) -> int:
    """Fewest env steps a generation can train: one PPO rollout (``num_envs x rollout_steps``)
    or one SAC vector step (``num_envs`` transitions)."""
    n = int(hyperparameters["num_envs"])
    return n if algorithm in OFF_POLICY else n * int(hyperparameters["rollout_steps"])


def check_env_steps(algorithm: str, hyperparameters: Mapping[str, Any], env_steps: int, *, field: str) -> None:
    """Refuse a generation budget smaller than :func:`min_env_steps`.

    Raises:
        ConfigError: naming ``field`` (e.g. ``"generation_steps"``).
    """
    need = min_env_steps(algorithm, hyperparameters)
    if env_steps < need:
        what = (
            f"one vector step of num_envs = {need}"
            if algorithm in OFF_POLICY
            else f"one rollout of num_envs x rollout_steps = {hyperparameters['num_envs']} x "
            f"{hyperparameters['rollout_steps']} = {need}"
        )
        raise ConfigError(f"{field}: {env_steps} env steps are less than {what}", field=field)


# ---------------------------------------------------------------------------- evaluation
def _eval_config(config: Any, **changes: Any) -> Any:
    names = {f.name for f in dataclasses.fields(config)}
    base = {"random_start": False, "randomize_initial": False, "episode_length": None}
    return dataclasses.replace(config, **{k: v for k, v in {**base, **changes}.items() if k in names})


@torch.no_grad()
def _run_episodes(
    policy: Policy, env: Any, *, start_day: int | None, seed: int, policy_name: str
) -> tuple[np.ndarray, np.ndarray]:
    """Run every env of ``env`` for exactly one episode with ``policy``.

    Returns:
        ``values`` (E, L+1) float64 portfolio values in USD, column 0 before the first trade,
        and ``days`` (E, L+1) int64 day indices into ``env.data``; ``L`` is the longest episode,
        shorter episodes are padded with NaN / -1 (not the case for fixed-length windows).

    Raises:
        PolicyError: the policy emits a NaN or infinite action (named ``policy_name``).
    """
    options = {"start_day": start_day} if start_day is not None else None
    obs, info = env.reset(seed=seed, options=options)
    values = [info["portfolio_value"].double().cpu().numpy().copy()]
    days = [info["day"].cpu().numpy().copy()]
    active = np.ones(env.num_envs, dtype=bool)
    while active.any():
        action = policy(obs)
        check_policy_actions(action, policy=policy_name, date=env.data.dates[int(days[-1][active][0])])
        obs, _reward, terminated, truncated, info = env.step(action)
        v = info["portfolio_value"].double().cpu().numpy().copy()
        d = info["day"].cpu().numpy().copy()
        v[~active], d[~active] = np.nan, -1
        values.append(v)
        days.append(d)
        done = (terminated | truncated).cpu().numpy()
        active &= ~done
    return np.stack(values, axis=1), np.stack(days, axis=1)


def evaluate_policy(
    policy: Policy,
    data: MarketData,
    env_config: Any,
    *,
    device: str | torch.device = "cpu",
    random_windows: int = EVAL_RANDOM_WINDOWS,
    window_days: int = EVAL_WINDOW_DAYS,
    seed: int = 0,
    benchmark_returns: pd.Series | None = None,
    feature_stats: FeatureStats | None = None,
    selection: SelectionRule | None = None,
    policy_name: str = "the policy",
) -> dict[str, Any]:
    """Score a deterministic policy on a date range, as the pods and the CLI do.

    The main episode trades the whole range from its first day with ``initial_cash`` and no
    holdings (no random start, no random wealth). ``random_windows`` more episodes of
    ``window_days`` steps start on random days (seeded), showing how much the result depends
    on the start day.

    Args:
        policy: obs (B, obs_dim) float32 on ``device`` -> action (B, action_dim) in [-1, 1].
        data: the evaluation range (e.g. the validation split), at least 2 days.
        env_config: trading rules (costs, hmax...); its episode settings are overridden.
        device: where the evaluation env lives.
        random_windows: number of random-start windows (0 to skip them).
        window_days: steps of each window; shortened to fit the data.
        seed: seed of the window start days.
        benchmark_returns: optional daily benchmark returns (e.g. QQQ) covering the range.
        feature_stats: the train split's z-score statistics for scale-free observations
            (``data`` must then come from :func:`trainer.envs.kinds.prepare_market`).
        selection: the scoring rule; default :class:`SelectionRule` (mean - 1 x std of the
            Sharpe ratios of 4 sub-windows).
        policy_name: who the policy is, for errors (e.g. ``"agent 12"``, a file name).

    Returns:
        JSON-able dict: every key of :func:`trainer.backtest.metrics.compute_metrics` for the
        full-range episode (``sharpe_ratio``, ``cumulative_return``, ``max_drawdown``...),
        plus ``total_return`` (= ``cumulative_return``, a fraction), ``final_value`` (USD),
        ``initial_value`` (USD), ``score`` (the robust score of ``selection``; undefined Sharpe
        ratios, e.g. of a policy that never trades, count as 0), ``score_defined`` (bool: the
        full-window Sharpe ratio exists), ``selection`` (the rule, with ``description``),
        ``sub_windows`` (list of ``{start, end, sharpe}``), ``vs_equal_weight`` and, with
        ``benchmark_returns``, ``vs_QQQ`` (:func:`trainer.selection.baseline_relative` on the
        same days; equal weight is the cost-free daily-rebalanced 1/N portfolio), and
        ``random_windows`` (``count``, ``days``, ``total_return_mean``, ``total_return_min``,
        ``total_return_max``, ``sharpe_mean``, ``start_dates``).

    Raises:
        DataError: ``data`` has fewer than 2 days or unusable prices.
        PolicyError: the policy emits a NaN or infinite action; it is never scored (a NaN
            action used to mean "hold", which gave a diverged policy a quiet score of 0).
    """
    device = torch.device(device)
    selection = selection or SelectionRule()
    full_env = make_env(
        data, _eval_config(env_config), num_envs=1, device=device, seed=seed, feature_stats=feature_stats
    )
    values, days = _run_episodes(policy, full_env, start_day=0, seed=seed, policy_name=policy_name)
    v = values[0]
    dates = pd.DatetimeIndex(data.dates[days[0]])
    returns = pd.Series(v[1:] / v[:-1] - 1.0, index=dates[1:], name="returns")
    metrics = compute_metrics(returns, benchmark_returns, start_date=dates[0])
    sharpe = metrics.get("sharpe_ratio")
    metrics["total_return"] = metrics["cumulative_return"]
    metrics["initial_value"] = float(v[0])
    metrics["final_value"] = float(v[-1])
    metrics["score_defined"] = sharpe is not None
    daily = returns.to_numpy()
    score, subs = robust_score(daily, selection)
    metrics["score"] = score
    metrics["selection"] = {**selection.to_dict(), "description": selection.describe()}
    metrics["sub_windows"] = [
        {"start": str(dates[lo].date()), "end": str(dates[hi].date()), "sharpe": sub}
        for (lo, hi), sub in zip(window_bounds(len(daily), selection.windows), subs)
    ]
    metrics["vs_equal_weight"] = baseline_relative(daily, equal_weight_returns(data.close[days[0]]))
    if benchmark_returns is not None:
        bench = benchmark_returns.reindex(returns.index)
        if bench.notna().all():
            metrics["vs_QQQ"] = baseline_relative(daily, bench.to_numpy())

    windows: dict[str, Any] = {"count": 0}
    length = min(window_days, data.num_days - 1)
    if random_windows > 0 and length >= 2 and data.num_days - 1 > length:
        cfg = _eval_config(env_config, random_start=True, episode_length=length)
        win_env = make_env(
            data, cfg, num_envs=random_windows, device=device, seed=seed + 1, feature_stats=feature_stats
        )
        wv, wd = _run_episodes(policy, win_env, start_day=None, seed=seed + 1, policy_name=policy_name)
        totals, sharpes = [], []
        for i in range(random_windows):
            row = wv[i][~np.isnan(wv[i])]
            totals.append(float(row[-1] / row[0] - 1.0))
            r = row[1:] / row[:-1] - 1.0
            sd = float(np.std(r, ddof=1)) if len(r) > 1 else 0.0
            if sd > 0:
                sharpes.append(float(np.mean(r) / sd * math.sqrt(252)))
        windows = {
            "count": random_windows,
            "days": length,
            "start_dates": [str(data.dates[int(wd[i][0])]) for i in range(random_windows)],
            "total_return_mean": float(np.mean(totals)),
            "total_return_min": float(np.min(totals)),
            "total_return_max": float(np.max(totals)),
            "sharpe_mean": float(np.mean(sharpes)) if sharpes else None,
        }
    metrics["random_windows"] = windows
    return metrics


def evaluate_checkpoint_state(
    agent: Any,
    state: Mapping[str, Any],
    *,
    split: str = "validation",
    market_data: MarketData | None = None,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    benchmark_returns: pd.Series | None = None,
    device: str | torch.device = "cpu",
    seed: int | None = None,
) -> dict[str, Any]:
    """Score an agent of a checkpoint (or an ensemble of them) on a split of its task, exactly as
    :func:`run_generation` scores a generation: same env kind and rules, same train-split
    feature statistics, same selection rule.

    Args:
        agent: anything with ``act(obs, deterministic=True)``.
        state: the checkpoint dict (``task``, ``feature_stats``).
        split: ``"validation"`` (default) or ``"test"``.
        market_data: the task's loaded panel (else loaded from ``data_dir``).
        seed: seed of the random windows; default the checkpoint's (as the pod used).

    Returns:
        The dict of :func:`evaluate_policy`.

    Raises:
        ConfigError, DataError: an invalid task, split or data.
    """
    task = TaskSpec.from_dict(state["task"])
    market = (
        market_data if market_data is not None else load_market_data(task.data, data_dir=data_dir, cache_dir=cache_dir)
    )
    data = prepare_market(market, task.env).slice(*task.split(split), name=split)
    stats = FeatureStats.from_dict(state["feature_stats"]) if state.get("feature_stats") else None

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, deterministic=True)

    return evaluate_policy(
        policy,
        data,
        task.env,
        device=device,
        feature_stats=stats,
        selection=task.selection,
        benchmark_returns=benchmark_returns,
        seed=int(state.get("seed", 0) or 0) if seed is None else seed,
    )


# ---------------------------------------------------------------------------- generation
@dataclass
class GenerationResult:
    """What one generation produced.

    Attributes:
        checkpoint_path: the checkpoint file written (see :mod:`trainer.bundle`).
        sha256: hex SHA-256 of that file.
        score: validation Sharpe ratio of the full-window deterministic episode (0.0 when
            undefined, see :func:`evaluate_policy`); higher is better.
        metrics: the evaluation dict of :func:`evaluate_policy`, plus ``untrained``: the
            ``score``, ``sharpe_ratio`` and ``total_return`` of the line's untrained policy on
            the same validation days (evaluated before a fresh agent trains; a child carries
            its parent's).
        env_steps: env steps (transitions over all envs) trained in this generation.
        hyperparameters: the agent's full hyperparameters after any changes.
        cancelled: ``should_stop`` ended training early (the checkpoint is still written).
        duration_s: wall time of the whole generation, seconds.
        total_env_steps: env steps since the first generation of this lineage.
        generation: 1 for a fresh agent, the parent's + 1 otherwise.
        stats: the last training statistics returned by ``agent.learn``.
        telemetry: the training curve, at most ``TELEMETRY_MAX_POINTS`` points spread evenly
            over the generation's env steps, oldest first. Each point has ``env_steps`` and
            ``generation_env_steps`` (this generation so far), ``total_env_steps`` (the lineage
            so far, the x axis of a training curve), ``generation``, ``elapsed_s``,
            ``steps_per_s`` (since the previous point), ``episode_return_mean`` (training
            episodes, unscaled; None before any) and ``learning_rate``, plus PPO's
            ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``, ``clip_fraction``,
            ``explained_variance`` or SAC's ``critic_loss``, ``actor_loss``, ``alpha_loss``,
            ``alpha``; a value that is NaN or infinite is None.
    """

    checkpoint_path: Path
    sha256: str
    score: float
    metrics: dict[str, Any]
    env_steps: int
    hyperparameters: dict[str, Any]
    cancelled: bool
    duration_s: float
    total_env_steps: int = 0
    generation: int = 1
    stats: dict[str, Any] = field(default_factory=dict)
    telemetry: list[dict[str, Any]] = field(default_factory=list)


def _plain(value: Any) -> Any:
    """Make training stats JSON/weights_only friendly (tensors and numpy scalars to floats; NaN
    and infinities to the strings ``"NaN"``/``"inf"``/``"-inf"``, so they read as what they
    are rather than as missing values)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _plain(value.item() if value.numel() == 1 else value.detach().cpu().tolist())
    if isinstance(value, np.generic):
        return _plain(value.item())
    return labelled(value)


def _layout_key(layout: Mapping[str, Any]) -> tuple:
    return (layout.get("obs_dim"), tuple(layout.get("tickers", ())), tuple(layout.get("feature_names", ())))


def branch_seed(parent_agent_state: dict[str, Any], seed: int) -> int:
    """Seed of a child generation's random stream: a hash of the parent's RNG state and ``seed``.

    Two children of one parent with different seeds draw different rollouts and minibatches;
    the same parent and seed give the same child (reproducible tournaments).

    Args:
        parent_agent_state: the parent's ``agent.state_dict()`` (its ``"generator"`` entry is
            the torch generator state, a uint8 tensor).
        seed: this generation's seed.

    Returns:
        A non-negative 63-bit integer for ``torch.Generator.manual_seed``.
    """
    digest = hashlib.sha256()
    generator_state = parent_agent_state.get("generator")
    if isinstance(generator_state, torch.Tensor):
        digest.update(generator_state.cpu().numpy().tobytes())
    digest.update(int(seed).to_bytes(8, "little", signed=True))
    return int.from_bytes(digest.digest()[:8], "little") >> 1


def run_generation(
    task: TaskSpec | Mapping[str, Any],
    *,
    env_steps: int,
    out_path: str | Path,
    parent: str | Path | Mapping[str, Any] | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    progress: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    market_data: MarketData | None = None,
    benchmark_returns: pd.Series | None = None,
    telemetry: Callable[[dict], None] | None = None,
) -> GenerationResult:
    """Train one generation on the train split, score it on validation, write a checkpoint.

    Steps: load the data (or use ``market_data``) and cut the splits; build a
    :class:`StockTradingVecEnv` over the train split with ``num_envs`` from the
    hyperparameters; build the agent (fresh, or the parent's full training state with the
    ``hyperparameters`` changes applied through ``agent.set_hyperparameters``); call
    ``agent.learn`` for ``env_steps``; evaluate with :func:`evaluate_policy` on the validation
    split; write the checkpoint atomically.

    Cancellation: ``should_stop`` is checked by the agent between updates. When it returns
    True, training stops after the current update, the agent is still evaluated and the
    checkpoint is still written (it holds the complete state after the last finished update,
    so no work is lost and a later generation can resume from it); the result has
    ``cancelled=True`` and the caller decides whether to submit it.

    The env is rebuilt each generation (its episodes restart, seeded by ``seed``); the agent's
    state (networks, optimizers, normalizer, RNG, counters) continues exactly from the parent.

    Args:
        task: the task (a :class:`TaskSpec` or a dict for :meth:`TaskSpec.from_dict`).
        env_steps: env-step budget of this generation (transitions summed over all envs, > 0).
        out_path: checkpoint file to write (``*.pt``); its folder is created.
        parent: checkpoint path or an already loaded checkpoint dict to continue from.
        hyperparameters: changes to the hyperparameters (PBT mutation), e.g.
            ``{"learning_rate": 1e-4}``; validated like the task's.
        seed: seed of the fresh agent and of the envs.
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ``"cuda:N"``
            (checked by :func:`trainer.device.pick_device`); a ``torch.device`` is used as
            given (the device-discipline test trains on a stand-in accelerator).
        progress: called at most about 4 times a second with the agent's progress dict
            (``env_steps``, ``steps_per_s``, ``episode_return_mean``, losses...) plus
            ``phase`` (``"train"``/``"evaluate"``/``"done"``), ``generation_env_steps``,
            ``env_steps_budget``, ``elapsed_s`` and ``eta_s``; the ``"done"`` call also has
            ``score``.
        should_stop: cancel signal, checked between updates.
        data_dir: folder that relative ``task.data.paths`` resolve against.
        cache_dir: Parquet cache folder of the processed data (``None``: no cache).
        market_data: an already loaded panel covering the splits (skips loading).
        benchmark_returns: daily QQQ returns covering the validation split, for the
            baseline-relative validation results (``metrics["vs_QQQ"]``); optional.
        telemetry: called with each training-curve point as the agent records it (at most
            ``TELEMETRY_MAX_POINTS`` per generation, see :attr:`GenerationResult.telemetry`),
            e.g. to store or stream it while the generation runs.

    Returns:
        :class:`GenerationResult`.

    Divergence: the agent checks its losses, gradient norms and parameters once per update
    and the evaluation checks every action; a NaN or infinity raises :class:`~trainer.errors.Diverged` and
    no checkpoint is written (the same hyperparameters would diverge again, so callers treat
    it as a permanent failure of this generation, not of the task).

    Raises:
        trainer.errors.Diverged: training or the trained policy produced NaN or infinite numbers; the message
            names the update, the quantity and the learning rate(s), e.g. ``"PPO diverged at
            update 37: policy loss is NaN; learning_rate=1000"``.
        ConfigError: an invalid task, budget, device or hyperparameter change; a split with
            fewer trading days than :data:`MIN_SPLIT_DAYS` or outside the data (field
            ``"<split>.start"``/``"<split>.end"``); a buffer over :data:`MAX_BUFFER_BYTES`.
        DataError: the data cannot be loaded.
        BundleError: the parent checkpoint is unreadable or does not fit the task (other
            algorithm, tickers or indicators).
    """
    started = time.monotonic()
    if not isinstance(task, TaskSpec):
        task = TaskSpec.from_dict(task)
    if isinstance(env_steps, bool) or not isinstance(env_steps, int | np.integer) or env_steps < 1:
        raise ConfigError(f"env_steps: must be a positive integer (got {env_steps!r})", field="env_steps")
    env_steps = int(env_steps)
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    configure_device(torch_device)

    market = (
        market_data if market_data is not None else load_market_data(task.data, data_dir=data_dir, cache_dir=cache_dir)
    )
    check_split_days({name: task.split(name) for name in SPLITS}, market.dates)
    raw_market = market
    market = prepare_market(market, task.env)  # scale-free features over the whole panel (causal)
    train_data = market.slice(*task.train, name="train")
    validation_data = market.slice(*task.validation, name="validation")
    # Z-score statistics of the train split only; a continued agent keeps its lineage's.
    feature_stats = fit_stats(train_data, task.env)

    parent_state: Mapping[str, Any] | None = None
    parent_file: str | None = None
    if parent is not None:
        if isinstance(parent, Mapping):
            parent_state = parent
        else:
            parent_file = str(parent)
            parent_state = load_checkpoint(parent)
        if parent_state.get("algorithm") != task.algorithm:
            raise BundleError(
                f"parent checkpoint was trained with {parent_state.get('algorithm')!r}, the task uses {task.algorithm!r}",
                file=parent_file,
            )
        base_hp = dict(parent_state["hyperparameters"])
    else:
        base_hp = dict(task.hyperparameters)
    changes = dict(hyperparameters or {})
    merged = validate_hyperparameters(task.algorithm, {**base_hp, **changes})

    if parent_state is not None and feature_stats is not None and parent_state.get("feature_stats"):
        feature_stats = FeatureStats.from_dict(parent_state["feature_stats"])
    obs_dim, action_dim = observation_dim(task.env, len(raw_market.tickers), len(raw_market.feature_names))
    check_buffer_memory(task.algorithm, merged, obs_dim, action_dim, limit=buffer_memory_limit(torch_device))
    env = make_env(
        train_data,
        task.env,
        num_envs=int(merged["num_envs"]),
        device=torch_device,
        seed=seed,
        feature_stats=feature_stats,
    )
    layout = env.observation_layout()
    if parent_state is not None and _layout_key(parent_state["observation_layout"]) != _layout_key(layout):
        old = parent_state["observation_layout"]
        raise BundleError(
            "parent checkpoint does not fit this task's data: it was trained on "
            f"{len(old.get('tickers', []))} tickers x {len(old.get('feature_names', []))} indicators "
            f"(obs_dim {old.get('obs_dim')}), the task has {len(layout['tickers'])} x "
            f"{len(layout['feature_names'])} (obs_dim {layout['obs_dim']})",
            file=parent_file,
        )

    if parent_state is not None:
        agent = make_agent(task.algorithm, env.obs_dim, env.action_dim, base_hp, device=torch_device, seed=seed)
        agent.load_state_dict(parent_state["agent"])
        # Branch the parent's random stream with this generation's seed: pods that continue the
        # same parent must explore differently, not replay the parent's stream bit for bit.
        # Networks, optimizer moments, normalizer and counters still continue exactly.
        agent.generator.manual_seed(branch_seed(parent_state["agent"], seed))
        real_changes = {k: v for k, v in merged.items() if base_hp.get(k) != v}
        if real_changes:
            try:
                agent.set_hyperparameters(**real_changes)
            except ConfigError as exc:
                raise _reprefix(exc, "hyperparameters", inner=task.algorithm) from None
    else:
        agent = make_agent(task.algorithm, env.obs_dim, env.action_dim, merged, device=torch_device, seed=seed)

    parent_total = int(parent_state.get("total_env_steps", 0)) if parent_state is not None else 0
    generation = int(parent_state.get("generation", 0)) + 1 if parent_state is not None else 1

    def report(payload: dict[str, Any]) -> None:
        if progress is None:
            return
        elapsed = time.monotonic() - started
        done = int(payload.get("env_steps", 0))
        rate = payload.get("steps_per_s") or (done / elapsed if elapsed > 0 else 0.0)
        eta = (env_steps - done) / rate if rate and done < env_steps else 0.0
        progress(
            {
                **payload,
                "phase": payload.get("phase", "train"),
                "generation_env_steps": done,
                "env_steps_budget": env_steps,
                "total_env_steps": parent_total + done,
                "generation": generation,
                "elapsed_s": elapsed,
                "eta_s": max(0.0, float(eta)),
            }
        )

    def evaluate(name: str) -> dict[str, Any]:
        # Evaluation steps 1 + EVAL_RANDOM_WINDOWS envs day by day: on the CPU, where the env is
        # exact (float64) and a tiny step costs less than an accelerator's kernel launches and syncs.
        if torch_device.type == "cpu":

            def policy(obs: torch.Tensor) -> torch.Tensor:
                return agent.act(obs, deterministic=True)

        else:
            policy = agent.policy_module().to("cpu")
        return evaluate_policy(
            policy,
            validation_data,
            task.env,
            device="cpu",
            seed=seed,
            feature_stats=feature_stats,
            selection=task.selection,
            benchmark_returns=benchmark_returns,
            policy_name=name,
        )

    # The untrained policy of the line, scored on the same validation days: the baseline a
    # trained agent's score is read against (a child inherits its line's).
    if parent_state is None:
        before = evaluate(f"the untrained {task.algorithm} agent")
        untrained = {k: before.get(k) for k in ("score", "sharpe_ratio", "total_return")}
    else:
        untrained = dict((parent_state.get("metrics") or {}).get("untrained") or {}) or None

    points: list[dict[str, Any]] = []

    def record(point: dict[str, Any]) -> None:
        point = {
            **point,
            "generation_env_steps": int(point["env_steps"]),
            "total_env_steps": parent_total + int(point["env_steps"]),
            "generation": generation,
        }
        points.append(point)
        if telemetry is not None:
            telemetry(point)

    stats = agent.learn(
        env,
        env_steps,
        progress=report if progress is not None else None,
        should_stop=should_stop,
        telemetry=record,
    )
    stats = _plain(dict(stats or {}))
    cancelled = bool(stats.get("cancelled", False))
    trained = int(stats.get("env_steps", env_steps))
    if progress is not None:
        report({"phase": "evaluate", "env_steps": trained})

    try:
        metrics = evaluate(f"the {task.algorithm} agent")
    except PolicyError as exc:
        # finite losses and parameters, yet NaN actions: diverged all the same (no checkpoint)
        value = str(exc.details.get("value", "NaN"))
        error = agent.divergence(update=agent.updates, quantity="validation_action", value=value, stats=stats)
        error.details["date"] = exc.details.get("date")
        raise error from None
    if untrained is not None:
        metrics["untrained"] = untrained
    score = float(metrics["score"])
    hp_now = _plain(dict(agent.hyperparameters()))

    state = {
        "created_at": utc_now(),
        "paddock_version": __version__,
        "algorithm": task.algorithm,
        "hyperparameters": hp_now,
        "agent": agent.state_dict(),
        "obs_dim": env.obs_dim,
        "action_dim": env.action_dim,
        "observation_layout": layout,
        "env_config": task.env.to_dict(),
        "kind": kind_of(task.env),
        "feature_stats": feature_stats.to_dict() if feature_stats is not None else None,
        "task": task.to_dict(),
        "data_window": {
            "tickers": list(market.tickers),
            "feature_names": list(raw_market.feature_names),
            "train": [str(train_data.dates[0]), str(train_data.dates[-1])],
            "validation": [str(validation_data.dates[0]), str(validation_data.dates[-1])],
            "test": list(task.test),
            "content_sha256": raw_market.content_hash(),
            "source": market.source,
            "notes": list(market.notes),
        },
        "score": score,
        "metrics": metrics,
        "stats": stats,
        "env_steps": trained,
        "total_env_steps": parent_total + trained,
        "generation": generation,
        "parent_sha256": sha256_file(parent_file) if parent_file is not None else None,
        "seed": int(seed),
        "cancelled": cancelled,
    }
    out_path = Path(out_path)
    digest = save_checkpoint(state, out_path)
    duration = time.monotonic() - started
    if progress is not None:
        report({"phase": "done", "env_steps": trained, "score": score})
    return GenerationResult(
        checkpoint_path=out_path,
        sha256=digest,
        score=score,
        metrics=metrics,
        env_steps=trained,
        hyperparameters=hp_now,
        cancelled=cancelled,
        duration_s=duration,
        total_env_steps=parent_total + trained,
        generation=generation,
        stats=stats,
        telemetry=points,
    )
