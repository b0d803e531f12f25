"""Learning quality: do trained agents beat equal weight and QQQ on unseen test years?

Trains at **equal env steps** per arm and seed, selects on validation only, and evaluates the
selected agents on each window's test split from ``PADDOCK_DATA_DIR`` (``../shared/data``):

* ``dow30-2020``: Dow 30 (29 tickers with full history), train 2010-2018, validation 2019,
  test 2020;
* ``dow30-2021``: Dow 30, train 2010-2019, validation 2020, test 2021-01-01..2022-11-15;
* ``ndx-2021``: Nasdaq-100 members with full history since 2010, same dates as ``dow30-2021``.

Arms (each gets ``pods x generations x generation_steps`` env steps per seed):

* ``stock single pod``: the stock-trading env, one pod continuing its own agent for
  ``pods x generations`` generations; the agent kept is its best by validation score;
* ``portfolio single pod``: the same with the portfolio env;
* ``portfolio tournament``: ``pods`` pods for ``generations`` generations with
  :mod:`trainer.tournament` (parent drawn from a leaderboard of 5 with weights
  ``exp((score - best) / SE)``, a pod's own agent replaced only by one better by more than one
  paired SE, 10 % fresh starts, learning rate and entropy weight mutated by 0.8x / 1.25x:
  :func:`tournament_board`), in-process; every pod's first
  generation is fresh, as for the web app's pods that start together;
* ``top-3 ensemble``: the average action of the tournament leaderboard's 3 best agents;
* ``mixed tournament``: the portfolio tournament with three algorithms, FinRL's ensemble set
  (PPO, A2C, DDPG), each with its own hyperparameters (:data:`MIXED`): every pod's first
  generation is fresh, pod *i* training ``MIXED_ALGORITHMS[i % 3]`` (the web app's round-robin
  for pods that start together); children keep their parent's algorithm and mutate only the
  bounds their algorithm has (:data:`MIXED_MUTATION_BOUNDS`); one leaderboard ranks them all;
* ``mixed top-3 ensemble``: the average action of the mixed leaderboard's 3 best agents
  (whatever their algorithms).

All selection uses the task's validation score (mean - 1 x std of the Sharpe ratios of four
validation quarters, :mod:`trainer.selection`); nothing looks at the test split before the final
evaluation. The baselines on the same test days: QQQ buy-and-hold, equal weight buy-and-hold
(the backtest reports' line) and 1/N rebalanced daily (DeMiguel et al. 2009), all cost-free.

Output: one markdown table per window (test total return, annual return, Sharpe ratio, max
drawdown: mean +- standard deviation over seeds), then the targets of issue 12 and whether
the mixed tournament beats the PPO tournament. The turnover settings and the selection study
below apply to the PPO arms only (the selection study trains no mixed arm).

**Portfolio settings** (``--band``, ``--penalty``, ``--init-log-std``, ``--reward``): the
portfolio env's ``rebalance_band``, ``turnover_penalty`` and ``reward`` and the portfolio PPO's
initial exploration noise ``init_log_std`` for the portfolio arms (default: the product's band
for new portfolio tasks, :data:`~trainer.envs.portfolio_config.RECOMMENDED_REBALANCE_BAND`, no
penalty, PPO's default noise, ``log_return``); each reward has its PPO ``reward_scale``
(:data:`REWARD_SCALES`).

**Selection study** (``--select BAND:PENALTY[:LOG_STD[:REWARD]] ...``, the first one the
reference, e.g. ``--select 0:0 0.005:0 0:0.001 0:0:-1.5 0.01:0::differential_sharpe``): per window and seed, trains the portfolio single pod and the
tournament (no stock-trading arm) for every setting and prints their validation scores only.
The rule, fixed before any test figure is printed: the chosen setting is the one with the
highest validation score averaged over windows, seeds and the two arms (the single pod's best
and the tournament's top agent); ties go to the reference. Only then are the chosen setting's
and the reference's agents (already trained) run on the test windows; the other settings' test
figures are never computed.

**Walk-forward protocol** (``--walk-forward``): the Dow 30 and Nasdaq-100 with anchored yearly
folds tested on 2014-2022 and the simple baselines on the same days (1/N with costs, inverse
volatility, 12-1 momentum tilt, low-volatility tilt), each against the cost-free 1/N with an
interval and a verdict (:mod:`walk_forward_baselines`, ``docs/walk-forward.md``). The windows
above that test on 2021-01..2022-11 have been read too often: that span is validation inside
the walk-forward now, not a headline.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/learning_quality.py [--quick] [--seeds 0 1 2]
[--band B --penalty P --init-log-std S | --select B:P[:S] ...]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from trainer import mutation, tournament  # noqa: E402
from trainer.artifacts.checkpoints import load_checkpoint  # noqa: E402
from trainer.artifacts.rebuild import build_agent  # noqa: E402
from trainer.backtest.benchmark import load_benchmark_close  # noqa: E402
from trainer.backtest.policy_run import run_policy  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.envs.kinds import make_env, prepare_market  # noqa: E402
from trainer.envs.observations import FeatureStats  # noqa: E402
from trainer.envs.portfolio_config import RECOMMENDED_REBALANCE_BAND, RECOMMENDED_REWARD_SCALES  # noqa: E402
from trainer.evaluation import eval_config  # noqa: E402
from trainer.pod import run_generation  # noqa: E402
from trainer.selection import annual_sharpe  # noqa: E402
from trainer.task import TaskSpec  # noqa: E402

DOW30 = "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
NDX = "nasdaq100_daily_eodhd_2010-01-04_2022-11-15.csv.gz"
BENCHMARK = "benchmark_etfs_daily_eodhd.csv.gz"
WINDOWS = {
    "dow30-2020": (DOW30, ("2010-01-01", "2018-12-31"), ("2019-01-01", "2019-12-31"), ("2020-01-01", "2020-12-31")),
    "dow30-2021": (DOW30, ("2010-01-01", "2019-12-31"), ("2020-01-01", "2020-12-31"), ("2021-01-01", "2022-11-15")),
    "ndx-2021": (NDX, ("2010-01-01", "2019-12-31"), ("2020-01-01", "2020-12-31"), ("2021-01-01", "2022-11-15")),
}
#: PPO settings of every arm. 256 envs x 16 steps per rollout; 64x64 networks (PPO's default);
#: the portfolio env's log-return rewards (~0.01 a day) are scaled by 100 to the order of the
#: stock-trading env's default rewards. Chosen before any test window was looked at.
PPO = {"num_envs": 256, "rollout_steps": 16, "num_minibatches": 4, "update_epochs": 2, "hidden_sizes": [64, 64]}
PORTFOLIO_PPO = {**PPO, "reward_scale": 100.0}
MUTATION_BOUNDS = {"learning_rate": (1e-5, 3e-3), "ent_coef": (0.0, 0.05)}
LEADERBOARD = 5
FRESH_PROBABILITY = 0.1
#: The mixed tournament's algorithms (FinRL's ensemble strategy trains A2C, PPO and DDPG) and
#: each one's settings: 64x64 networks, 256 envs and rewards scaled by 100 as for PPO; DDPG's
#: replay buffer cut to 65,536 transitions (the default's 262,144 would take ~0.6 GB at the
#: portfolio env's observation size), updates once per vector step on batches of 256 after
#: 4,096 transitions. Chosen before any test window was looked at, not tuned.
MIXED_ALGORITHMS = ("ppo", "a2c", "ddpg")
MIXED = {
    "ppo": PORTFOLIO_PPO,
    "a2c": {"num_envs": 256, "rollout_steps": 16, "hidden_sizes": [64, 64], "reward_scale": 100.0},
    "ddpg": {
        "num_envs": 256,
        "hidden_sizes": [64, 64],
        "buffer_size": 65_536,
        "learning_starts": 4_096,
        "batch_size": 256,
        "updates_per_step": 1,
        "reward_scale": 100.0,
    },
}
MIXED_MUTATION_BOUNDS = {
    **MUTATION_BOUNDS,
    "actor_learning_rate": (1e-5, 3e-3),
    "critic_learning_rate": (1e-5, 3e-3),
}
PPO_ARMS = ("stock single pod", "portfolio single pod", "portfolio tournament", "top-3 ensemble")
MIXED_ARMS = ("mixed tournament", "mixed top-3 ensemble")
ARMS = (*PPO_ARMS, *MIXED_ARMS)
#: Key of :func:`train_arms`' result holding every portfolio PPO agent trained (the single pod's
#: generations and the tournament's) as (checkpoint, validation score), for the
#: validation-to-test rank correlation (a diagnostic of the selection, never used to select).
ALL_AGENTS = "all portfolio agents"
#: Row of the untrained portfolio policy: the zero action, i.e. 1/N traded with the arms' band
#: and costs (what a fresh agent does before any training).
UNTRAINED = "untrained portfolio policy (1/N, band and costs)"


#: A portfolio setting: (rebalance_band, turnover_penalty, PPO init_log_std or None for PPO's
#: default, the env's reward).
Setting = tuple[float, float, float | None, str]
DEFAULT_SETTING: Setting = (0.0, 0.0, None, "log_return")
#: PPO ``reward_scale`` per portfolio reward, fixed before any test window was looked at: the
#: log-return rewards (~0.01 a day) times 100, the differential Sharpe ratio (already of order
#: one, a return over a volatility) unscaled, so that all are of the order of the stock-trading
#: env's rewards.
REWARD_SCALES = RECOMMENDED_REWARD_SCALES  # the product's defaults for portfolio tasks


def task_dict(window: str, kind: str, setting: Setting = DEFAULT_SETTING, algorithm: str = "ppo") -> dict:
    """The task of one arm; ``setting`` applies to the portfolio env and its PPO only; another
    ``algorithm`` (the mixed tournament's) takes its :data:`MIXED` hyperparameters."""
    path, train, val, test = WINDOWS[window]
    env, hyperparameters = {}, dict(PORTFOLIO_PPO if kind == "portfolio" else PPO)
    if algorithm != "ppo":
        hyperparameters = dict(MIXED[algorithm])
    if kind == "portfolio" and setting[:2] != (0.0, 0.0):
        env = {"rebalance_band": setting[0], "turnover_penalty": setting[1]}
    if kind == "portfolio" and setting[3] != "log_return":
        env["reward"] = setting[3]
        hyperparameters["reward_scale"] = REWARD_SCALES[setting[3]]
    if kind == "portfolio" and setting[2] is not None and algorithm == "ppo":
        hyperparameters["init_log_std"] = setting[2]
    return {
        "data": {"paths": [path], "start": "2010-01-01", "end": test[1]},
        "train": list(train),
        "validation": list(val),
        "test": list(test),
        "kind": kind,
        "env": env,
        "algorithm": algorithm,
        "hyperparameters": hyperparameters,
    }


class Lineage:
    """Runs generations in-process and keeps every checkpoint's path and score.

    ``others`` holds the tasks of further algorithms (a mixed tournament): a generation runs
    the task of the ``algorithm`` it is given, ``task``'s by default.
    """

    def __init__(self, task: TaskSpec, market, workdir: Path, steps: int, others: dict | None = None) -> None:
        self.task, self.market, self.workdir, self.steps = task, market, workdir, steps
        self.tasks = {task.algorithm: task, **(others or {})}
        self.count = 0
        #: (checkpoint, validation score) of every generation run, in order
        self.records: list[tuple[Path, float]] = []
        #: the :class:`~trainer.pod.GenerationResult` of every generation run, in order
        self.results: list = []
        self.env_steps = 0

    def generation(self, *, parent=None, hyperparameters=None, seed: int, algorithm=None) -> tuple[Path, float]:
        self.count += 1
        out = self.workdir / f"g{self.count}.pt"
        result = run_generation(
            self.tasks[algorithm or self.task.algorithm],
            env_steps=self.steps,
            out_path=out,
            parent=parent,
            hyperparameters=hyperparameters,
            seed=seed,
            device="cpu",
            market_data=self.market,
        )
        self.env_steps += result.env_steps
        self.records.append((out, result.score))
        self.results.append(result)
        return out, result.score

    def entry(self, agent_id, seq: int) -> tournament.Entry:
        """The leaderboard entry of the last generation run (:func:`entry_of`)."""
        return entry_of(agent_id, seq, self.results[-1])


def entry_of(agent_id, seq: int, result) -> tournament.Entry:
    """The :class:`trainer.tournament.Entry` of a generation result, built by the same
    :func:`trainer.tournament.entry_from_metrics` as the web app's leaderboard rows (score,
    ``metrics["score_se"]``, ``metrics["sub_windows"]``): the score with its standard error
    and its validation sub-windows, so that :func:`~trainer.tournament.select_parent` samples
    by ``exp((score - best) / SE)`` and replaces a pod's agent only by one better by more than
    one (paired) SE."""
    metrics = result.metrics or {}
    return tournament.entry_from_metrics(
        agent_id, result.score, seq, metrics.get("score_se"), metrics.get("sub_windows")
    )


def single_pod(lineage: Lineage, generations: int, seed: int) -> list[tuple[Path, float]]:
    """One pod continuing its own agent; returns every (checkpoint, score)."""
    done, parent = [], None
    for g in range(generations):
        path, score = lineage.generation(parent=parent, seed=seed * 1000 + g)
        done.append((path, score))
        parent = path
    return done


def tournament_board(
    lineage: Lineage,
    pods: int,
    generations: int,
    seed: int,
    *,
    bounds: dict[str, tuple[float, float]] = MUTATION_BOUNDS,
    leaderboard: int = LEADERBOARD,
    fresh_probability: float = FRESH_PROBABILITY,
) -> list[tuple[Path, tournament.Entry]]:
    """``pods`` pods x ``generations`` with the product's leaderboard rules, in-process.

    Every pod's first generation is fresh (the web app's pods that start together); later ones
    go through :func:`trainer.tournament.select_parent_for` (parents sampled by ``exp((score - best) / SE)``, a pod
    keeps its own agent unless the candidate beats it by more than one paired SE, 10 % fresh
    starts); a copied parent's ``bounds`` are mutated by x0.8 or x1.25 (a kept agent continues
    unchanged, as in the web app). Pods run one after another, each seeing the board so far.

    Returns:
        The final leaderboard (the best ``leaderboard``), best first, as (checkpoint, entry).
    """
    rng = np.random.default_rng(seed)
    board: list[tournament.Entry] = []
    paths: dict[int, Path] = {}
    entries: dict[int, tournament.Entry] = {}
    current: list[int | None] = [None] * pods
    seq = 0
    for _ in range(generations):
        for p in range(pods):
            cur = current[p]
            if cur is None:  # the pods start together, as in the web app: each one's first agent is fresh
                choice = tournament.ParentChoice(tournament.FRESH)
            else:
                choice = tournament.select_parent_for(board, entries[cur], fresh_probability=fresh_probability, rng=rng)
            parent, changes = None, None
            if choice.action == tournament.KEEP_CURRENT and cur is not None:
                parent = paths[cur]
            elif choice.action == tournament.PARENT:
                parent = paths[choice.parent.agent_id]
                hp = load_checkpoint(parent)["hyperparameters"]
                changes, _ = mutation.mutate(hp, bounds, factors=(0.8, 1.25), rng=rng)
                changes = {k: v for k, v in changes.items() if k in bounds}
            paths[seq], _ = lineage.generation(parent=parent, hyperparameters=changes, seed=seed * 1000 + seq)
            entries[seq] = lineage.entry(seq, seq)
            board, _ = tournament.prune([*board, entries[seq]], leaderboard)
            current[p] = seq
            seq += 1
    return [(paths[e.agent_id], e) for e in tournament.rank(board, leaderboard)]


def run_tournament(lineage: Lineage, pods: int, generations: int, seed: int) -> list[tuple[Path, float]]:
    """:func:`tournament_board` with the PPO :data:`MUTATION_BOUNDS`; returns the board as
    (checkpoint, score), best first."""
    return [(path, entry.score) for path, entry in tournament_board(lineage, pods, generations, seed)]


def run_mixed_tournament(lineage: Lineage, pods: int, generations: int, seed: int) -> list[tuple[Path, float]]:
    """:func:`run_tournament` over :data:`MIXED_ALGORITHMS`: every pod starts fresh with
    algorithm ``MIXED_ALGORITHMS[pod % 3]``; children keep their parent's algorithm and mutate
    the bounds of :data:`MIXED_MUTATION_BOUNDS` their hyperparameters have; returns the board."""
    rng = np.random.default_rng(seed)
    board: list[tournament.Entry] = []
    paths: dict[int, tuple[Path, float, str]] = {}
    entries: dict[int, tournament.Entry] = {}
    current: list[int | None] = [None] * pods
    seq = 0
    for _ in range(generations):
        for p in range(pods):
            cur = current[p]
            if cur is None:  # the pods start together: each one's first agent is fresh
                choice = tournament.ParentChoice(tournament.FRESH)
            else:
                choice = tournament.select_parent_for(board, entries[cur], fresh_probability=FRESH_PROBABILITY, rng=rng)
            parent, changes = None, None
            algorithm = MIXED_ALGORITHMS[p % len(MIXED_ALGORITHMS)]
            if choice.action == tournament.KEEP_CURRENT:
                parent, algorithm = paths[cur][0], paths[cur][2]
            elif choice.action == tournament.PARENT:
                parent, algorithm = paths[choice.parent.agent_id][0], paths[choice.parent.agent_id][2]
                hp = load_checkpoint(parent)["hyperparameters"]
                own_bounds = {k: v for k, v in MIXED_MUTATION_BOUNDS.items() if k in hp}
                changes, _ = mutation.mutate(hp, own_bounds, factors=(0.8, 1.25), rng=rng)
                changes = {k: v for k, v in changes.items() if k in own_bounds}
            path, score = lineage.generation(
                parent=parent, hyperparameters=changes, seed=seed * 1000 + seq, algorithm=algorithm
            )
            paths[seq] = (path, score, algorithm)
            entries[seq] = lineage.entry(seq, seq)
            board, _ = tournament.prune([*board, entries[seq]], LEADERBOARD)
            current[p] = seq
            seq += 1
    ranked = tournament.rank(board, LEADERBOARD)
    print(f"    mixed leaderboard: {', '.join(f'{paths[e.agent_id][2]} {e.score:.2f}' for e in ranked)}", flush=True)
    return [(paths[e.agent_id][0], paths[e.agent_id][1]) for e in ranked]


def policy_of(checkpoints: list[Path]):
    """Deterministic policy of one checkpoint, or the average action of several (an ensemble)."""
    modules = [build_agent(load_checkpoint(c)).policy_module().eval() for c in checkpoints]

    @torch.no_grad()
    def policy(obs: torch.Tensor) -> torch.Tensor:
        return torch.stack([m(obs) for m in modules]).mean(0)

    return policy


def split_run(checkpoints: list[Path], market, split: str = "test", *, zero: bool = False) -> tuple[np.ndarray, float]:
    """Daily returns of the deterministic policy on a split (the pod's evaluation loop) and its
    mean daily turnover (traded value / portfolio value, from the costs paid; NaN without costs).
    ``zero``: the zero action instead, in the first checkpoint's env (for the portfolio env, a
    fresh agent's policy: 1/N, with that env's band and costs)."""
    state = load_checkpoint(checkpoints[0])
    task = TaskSpec.from_dict(state["task"])
    prepared = prepare_market(market, task.env)
    days = getattr(task, split)
    window = prepared.slice(*days, name=split)
    stats = FeatureStats.from_dict(state["feature_stats"]) if state.get("feature_stats") else None
    env = make_env(window, eval_config(task.env), num_envs=1, feature_stats=stats)
    policy = (lambda obs: torch.zeros(obs.shape[0], env.action_dim)) if zero else policy_of(checkpoints)
    trace = run_policy(policy, env, start_day=0, seed=0)
    v = trace.values[0]
    cost_pct = getattr(task.env, "cost_pct", 0.0)
    turnover = float(np.mean(trace.costs[0][1:-1] / v[1:-1]) / cost_pct) if cost_pct > 0 else float("nan")
    return v[1:] / v[:-1] - 1.0, turnover


def summary(returns: np.ndarray) -> dict[str, float]:
    wealth = np.cumprod(1 + returns)
    total = float(wealth[-1] - 1)
    years = len(returns) / 252
    peak = np.maximum.accumulate(np.concatenate([[1.0], wealth]))
    drawdown = float((np.concatenate([[1.0], wealth]) / peak - 1).min())
    return {
        "total": total,
        "annual": float((1 + total) ** (1 / years) - 1),
        "sharpe": annual_sharpe(returns) or 0.0,
        "mdd": drawdown,
    }


def fmt(values: list[float], pct: bool) -> str:
    scale = 100.0 if pct else 1.0
    mean = float(np.mean(values)) * scale
    if len(values) == 1:
        return f"{mean:.1f} %" if pct else f"{mean:.2f}"
    spread = float(np.std(values)) * scale
    return f"{mean:.1f} ± {spread:.1f} %" if pct else f"{mean:.2f} ± {spread:.2f}"


def parse_setting(text: str) -> Setting:
    """``"BAND:PENALTY[:LOG_STD[:REWARD]]"`` -> (rebalance_band, turnover_penalty, init_log_std
    or None, reward); an empty LOG_STD keeps PPO's default, e.g. ``0.01:0::differential_sharpe``."""
    parts = text.split(":")
    try:
        if len(parts) not in (2, 3, 4):
            raise ValueError
        reward = parts[3] if len(parts) == 4 else "log_return"
        if reward not in REWARD_SCALES:
            raise ValueError
        log_std = float(parts[2]) if len(parts) >= 3 and parts[2] else None
        return float(parts[0]), float(parts[1]), log_std, reward
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a setting is BAND:PENALTY[:LOG_STD[:REWARD]] with REWARD one of {', '.join(REWARD_SCALES)}, "
            f"e.g. 0.005:0, 0:0:-1.5 or 0.01:0::differential_sharpe (got {text!r})"
        ) from None


def setting_name(setting: Setting) -> str:
    std = f", init_log_std {setting[2]:g}" if setting[2] is not None else ""
    reward = f", reward {setting[3]}" if setting[3] != "log_return" else ""
    return f"band {setting[0]:g}, penalty {setting[1]:g}{std}{reward}"


def window_baselines(market, task: TaskSpec, qqq_close) -> dict[str, np.ndarray]:
    """Daily returns of QQQ, equal weight buy and hold and 1/N rebalanced daily on the test days."""
    test = market.slice(*task.test)
    qqq = qqq_close.reindex(test.dates.astype("datetime64[ns]")).to_numpy()
    ew = (test.close / test.close[0]).mean(1)
    return {
        "QQQ buy and hold": qqq[1:] / qqq[:-1] - 1,
        "equal weight buy and hold": np.diff(ew) / ew[:-1],
        "1/N rebalanced daily": (test.close[1:] / test.close[:-1]).mean(1) - 1,
    }


def train_arms(
    window, market, seed, setting, workdir: Path, args, *, stock: bool, mixed: bool = False
) -> dict[str, tuple[list[Path], float, int]]:
    """Train the arms of one window, seed and portfolio setting (the mixed ones too when
    ``mixed``); arm -> (checkpoints, validation score, env steps)."""
    out: dict[str, tuple[list[Path], float, int]] = {}
    agents: list[tuple[Path, float]] = []  # every portfolio PPO agent (single pod and tournament)
    kinds = [("stock_trading", "stock single pod")] if stock else []
    for kind, arm in (*kinds, ("portfolio", "portfolio single pod")):
        task = TaskSpec.from_dict(task_dict(window, kind, setting))
        lineage = Lineage(task, market, workdir / arm.replace(" ", "_"), args.generation_steps)
        lineage.workdir.mkdir(parents=True)
        done = single_pod(lineage, args.pods * args.generations, seed)
        best = max(done, key=lambda d: d[1])
        out[arm] = ([best[0]], best[1], lineage.env_steps)
        if kind == "portfolio":
            agents.extend(lineage.records)
    lineage = Lineage(
        TaskSpec.from_dict(task_dict(window, "portfolio", setting)),
        market,
        workdir / "tournament",
        args.generation_steps,
    )
    lineage.workdir.mkdir(parents=True)
    board = run_tournament(lineage, args.pods, args.generations, seed)
    agents.extend(lineage.records)
    out[ALL_AGENTS] = agents
    out["portfolio tournament"] = ([board[0][0]], board[0][1], lineage.env_steps)
    out["top-3 ensemble"] = ([p for p, _ in board[:3]], float(np.mean([s for _, s in board[:3]])), lineage.env_steps)
    if mixed:
        base = TaskSpec.from_dict(task_dict(window, "portfolio", setting))
        others = {a: TaskSpec.from_dict(task_dict(window, "portfolio", setting, a)) for a in MIXED_ALGORITHMS[1:]}
        lineage = Lineage(base, market, workdir / "mixed", args.generation_steps, others=others)
        lineage.workdir.mkdir(parents=True)
        board = run_mixed_tournament(lineage, args.pods, args.generations, seed)
        out["mixed tournament"] = ([board[0][0]], board[0][1], lineage.env_steps)
        top3 = ([p for p, _ in board[:3]], float(np.mean([s for _, s in board[:3]])), lineage.env_steps)
        out["mixed top-3 ensemble"] = top3
    return out


def print_window(window, market, trained: list[dict], baselines, arms, label: str = "") -> dict[str, float]:
    """One markdown table of test figures (mean ± std over seeds); returns the targets' inputs."""
    path, train, val, _ = WINDOWS[window]
    test = market.slice(*WINDOWS[window][3])
    print(
        f"\n### {window}{label}: {test.num_stocks} tickers ({path.split('_')[0]}), train {train[0]}..{train[1]}, "
        f"validation {val[0]}..{val[1]}, test {test.dates[0]}..{test.dates[-1]} ({test.num_days} days)\n"
    )
    print(
        "| arm | env steps | validation score | test total return | annual return | Sharpe | max drawdown "
        "| test turnover/day |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    sharpe: dict[str, float] = {}
    for arm in arms:
        rows, turnovers = [], []
        for seed_arms in trained:
            returns, turnover = split_run(seed_arms[arm][0], market, "test")
            rows.append(summary(returns))
            turnovers.append(turnover)
        sharpe[arm] = float(np.mean([r["sharpe"] for r in rows]))
        print(
            f"| {arm} | {int(np.mean([t[arm][2] for t in trained])):,} | {fmt([t[arm][1] for t in trained], False)} | "
            f"{fmt([r['total'] for r in rows], True)} | {fmt([r['annual'] for r in rows], True)} | "
            f"{fmt([r['sharpe'] for r in rows], False)} | {fmt([r['mdd'] for r in rows], True)} | "
            f"{fmt(turnovers, True)} |"
        )
    shown = dict(baselines)
    if "portfolio single pod" in arms:  # the untrained portfolio policy: 1/N with the arms' band and costs
        returns, turnover = split_run(trained[0]["portfolio single pod"][0], market, "test", zero=True)
        shown[UNTRAINED] = returns
    for name, r in shown.items():
        s = summary(r)
        paid = f"{100 * turnover:.1f} %" if name == UNTRAINED else "-"
        print(
            f"| {name} | - | - | {100 * s['total']:.1f} % | {100 * s['annual']:.1f} % | {s['sharpe']:.2f} "
            f"| {100 * s['mdd']:.1f} % | {paid} |"
        )
    print_rank_correlation(trained, market)
    print(flush=True)
    best_arm = max(("portfolio tournament", "top-3 ensemble"), key=lambda a: sharpe[a])
    mixed = {"mixed": sharpe["mixed tournament"]} if "mixed tournament" in sharpe else {}
    return {
        **mixed,
        "best": sharpe[best_arm],
        "best_arm": best_arm,
        "tournament": sharpe["portfolio tournament"],
        "single": sharpe["portfolio single pod"],
        "ew": summary(baselines["equal weight buy and hold"])["sharpe"],
        "ew_daily": summary(baselines["1/N rebalanced daily"])["sharpe"],
        "qqq": summary(baselines["QQQ buy and hold"])["sharpe"],
    }


def print_rank_correlation(trained: list[dict], market) -> None:
    """Spearman rank correlation of validation score and test Sharpe ratio over every portfolio
    PPO agent of the seeds (per seed, then the mean): does the validation score order agents as
    the test window does? Printed after the table; selection never sees it."""
    per_seed = []
    for seed_arms in trained:
        agents = seed_arms.get(ALL_AGENTS, [])
        if len(agents) < 3:
            return
        scores = [score for _, score in agents]
        tests = [annual_sharpe(split_run([path], market, "test")[0]) or 0.0 for path, _ in agents]
        per_seed.append(pd.Series(scores).corr(pd.Series(tests), method="spearman"))
    shown = ", ".join(f"{rho:+.2f}" for rho in per_seed)
    print(
        f"\nValidation score vs test Sharpe ratio, Spearman rank correlation over the "
        f"{len(trained[0][ALL_AGENTS])} portfolio agents of each seed (single pod and tournament "
        f"generations): {shown} (mean {np.mean(per_seed):+.2f})"
    )


def print_targets(targets: dict[str, dict[str, float]], label: str = "") -> None:
    print(
        f"### Targets{label} (mean test Sharpe over seeds of the better of tournament top agent and top-3 ensemble)\n"
    )
    beat_ew = sum(t["best"] >= max(t["ew"], t["ew_daily"]) for t in targets.values())
    beat_qqq = sum(t["best"] > t["qqq"] for t in targets.values())
    beat_single = sum(t["tournament"] > t["single"] for t in targets.values())
    for window, t in targets.items():
        print(
            f"- {window}: {t['best_arm']} {t['best']:.2f} vs equal weight {t['ew']:.2f} (1/N daily {t['ew_daily']:.2f}), "
            f"QQQ {t['qqq']:.2f}; tournament {t['tournament']:.2f} vs single pod {t['single']:.2f}"
        )
    n = len(targets)
    print(f"- at least equal weight (both kinds): {beat_ew} of {n} windows (target: 2 of 3)")
    print(f"- above QQQ: {beat_qqq} of {n} windows (target: 2 of 3)")
    print(f"- tournament above single portfolio pod: {beat_single} of {n} windows", flush=True)
    if all("mixed" in t for t in targets.values()):
        beat_ppo = sum(t["mixed"] > t["tournament"] for t in targets.values())
        print(f"- mixed (PPO, A2C, DDPG) tournament above the PPO tournament: {beat_ppo} of {n} windows", flush=True)
    print(flush=True)


def select(args, markets, qqq_close, started: float) -> None:
    """The selection study: validation scores of every setting, the rule, then test for two settings."""
    settings = args.select
    with tempfile.TemporaryDirectory() as tmp:
        # trained[window][setting] = one dict per seed (arm -> (checkpoints, score, env steps))
        trained: dict[str, dict[Setting, list[dict]]] = {w: {s: [] for s in settings} for w in args.windows}
        for window in args.windows:
            for seed in args.seeds:
                for i, setting in enumerate(settings):
                    work = Path(tmp) / window / f"seed{seed}" / f"setting{i}"
                    arms = train_arms(window, markets[window], seed, setting, work, args, stock=False)
                    trained[window][setting].append(arms)
                    print(
                        f"  {window} seed {seed} {setting_name(setting)}: {time.monotonic() - started:.0f} s",
                        flush=True,
                    )
        print("\n### Validation scores (selection study; no test figure computed yet)\n")
        header = " | ".join(f"{w} single pod | {w} tournament top" for w in args.windows)
        print(f"| setting | {header} | mean | validation turnover/day (tournament top) |")
        print("|---|" + "---:|" * (2 * len(args.windows) + 2))
        means = {}
        for setting in settings:
            cells, scores, turnovers = [], [], []
            for window in args.windows:
                for arm in ("portfolio single pod", "portfolio tournament"):
                    values = [seed_arms[arm][1] for seed_arms in trained[window][setting]]
                    scores.extend(values)
                    cells.append(fmt(values, False))
                for seed_arms in trained[window][setting]:
                    turnovers.append(split_run(seed_arms["portfolio tournament"][0], markets[window], "validation")[1])
            means[setting] = float(np.mean(scores))
            print(f"| {setting_name(setting)} | {' | '.join(cells)} | {means[setting]:.3f} | {fmt(turnovers, True)} |")
        reference = settings[0]
        chosen = max(settings, key=lambda s: (means[s], s == reference))
        print(
            f"\nRule: highest mean validation score over windows, seeds and the two arms (ties to the reference). "
            f"Chosen: {setting_name(chosen)} ({means[chosen]:.3f}); reference: {setting_name(reference)} "
            f"({means[reference]:.3f}).\n",
            flush=True,
        )
        if args.validation_only:
            return
        shown = [(reference, " (reference)")] + ([(chosen, " (chosen)")] if chosen != reference else [])
        if args.test_all:  # settings chosen on other windows' validation: no rule here
            shown = [(s, "") for s in settings]
        for setting, label in shown:
            targets = {}
            for window in args.windows:
                base = TaskSpec.from_dict(task_dict(window, "portfolio"))
                targets[window] = print_window(
                    window,
                    markets[window],
                    trained[window][setting],
                    window_baselines(markets[window], base, qqq_close),
                    PPO_ARMS[1:],
                    f", {setting_name(setting)}{label}",
                )
            print_targets(targets, f", {setting_name(setting)}{label}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny budget, one seed, one window")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--windows", nargs="+", default=list(WINDOWS), choices=list(WINDOWS))
    parser.add_argument("--pods", type=int, default=3)
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--generation-steps", type=int, default=65_536)
    parser.add_argument(
        "--band",
        type=float,
        default=RECOMMENDED_REBALANCE_BAND,
        help=f"portfolio env rebalance_band (default {RECOMMENDED_REBALANCE_BAND:g}, new portfolio tasks' band)",
    )
    parser.add_argument("--penalty", type=float, default=0.0, help="portfolio env turnover_penalty (default 0)")
    parser.add_argument("--init-log-std", type=float, help="portfolio PPO init_log_std (default PPO's)")
    parser.add_argument(
        "--reward", default="log_return", choices=list(REWARD_SCALES), help="portfolio env reward (default log_return)"
    )
    parser.add_argument(
        "--select",
        type=parse_setting,
        nargs="+",
        metavar="BAND:PENALTY[:LOG_STD]",
        help="selection study over these portfolio settings (the first is the reference); see the docstring",
    )
    parser.add_argument(
        "--test-all",
        action="store_true",
        help="with --select: test figures for every listed setting, no rule (settings chosen on other windows)",
    )
    parser.add_argument(
        "--validation-only", action="store_true", help="with --select: stop after the validation scores and the rule"
    )
    parser.add_argument(
        "--data-dir", default=os.environ.get("PADDOCK_DATA_DIR") or str(REPO.parent / "shared" / "data")
    )
    parser.add_argument(
        "--walk-forward",
        action="store_true",
        help="the walk-forward protocol instead: the simple baselines on test years 2014-2022 "
        "(benchmarks/walk_forward_baselines.py; docs/walk-forward.md)",
    )
    args = parser.parse_args()
    if args.walk_forward:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from walk_forward_baselines import FILES, universe_table

        for name, file in FILES.items():
            print("\n".join(universe_table(name, Path(args.data_dir) / file)), end="\n\n")
        return
    if args.quick:
        # 3 pods: one per algorithm of the mixed tournament
        args.seeds, args.pods, args.generations, args.generation_steps = [0], 3, 2, 8192
        if not args.select:
            args.windows = ["dow30-2020"]
    torch.set_num_threads(1)
    started = time.monotonic()
    budget = args.pods * args.generations * args.generation_steps
    print(
        f"# learning quality: {budget:,} env steps per arm and seed ({args.pods} pods x {args.generations} "
        f"generations x {args.generation_steps:,}); seeds {args.seeds}; torch {torch.__version__}, 1 thread\n"
    )
    qqq_close = load_benchmark_close(Path(args.data_dir) / BENCHMARK)
    markets = {
        w: load_market_data(TaskSpec.from_dict(task_dict(w, "portfolio")).data, data_dir=args.data_dir)
        for w in args.windows
    }
    if args.select:
        select(args, markets, qqq_close, started)
        print(f"\nwall time {time.monotonic() - started:.0f} s")
        return
    setting = (args.band, args.penalty, args.init_log_std, args.reward)
    label = f", portfolio {setting_name(setting)}" if setting != DEFAULT_SETTING else ""
    targets: dict[str, dict[str, float]] = {}
    for window in args.windows:
        base = TaskSpec.from_dict(task_dict(window, "portfolio"))
        with tempfile.TemporaryDirectory() as tmp:
            trained = []
            for seed in args.seeds:
                work = Path(tmp) / f"seed{seed}"
                arms = train_arms(window, markets[window], seed, setting, work, args, stock=True, mixed=True)
                trained.append(arms)
                print(f"  {window} seed {seed}: {time.monotonic() - started:.0f} s", flush=True)
            baselines = window_baselines(markets[window], base, qqq_close)
            targets[window] = print_window(window, markets[window], trained, baselines, ARMS, label)
    print_targets(targets, label)
    print(f"\nwall time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
