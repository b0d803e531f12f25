"""The demo's definitions: the Dow-30 task (data file, splits, names), the PBT settings and the
machine profiles (:class:`DemoProfile`) with the task spec and hyperparameters they give.

See :mod:`webapp.demo` for what the demo is.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from webapp import engine
from webapp.market.models import Dataset

#: The demo task as the trainer defines it (``trainer.demo``): data file, data range, splits.
_DEMO_TASK = engine.demo_task()
#: The shared offline copy (see ``../shared/data/README.md``); adjusted close in ``adj_close``.
DOW30_FILE = _DEMO_TASK["data"]["paths"][0]
#: Where a Yahoo Finance download of the same tickers is written when DOW30_FILE is absent.
DOW30_DOWNLOAD_FILE = "dow30_daily_yfinance_2010-01-01_2022-11-15.csv.gz"
#: The Dow Jones Industrial Average members of 2022 (DOW listed on 2019-03-20).
DOW30_TICKERS = (
    "AAPL", "AMGN", "AXP", "BA", "CAT", "CRM", "CSCO", "CVX", "DIS", "DOW",
    "GS", "HD", "HON", "IBM", "INTC", "JNJ", "JPM", "KO", "MCD", "MMM",
    "MRK", "MSFT", "NKE", "PG", "TRV", "UNH", "V", "VZ", "WBA", "WMT",
)  # fmt: skip
DATA_START = _DEMO_TASK["data"]["start"]
DATA_END = _DEMO_TASK["data"]["end"]
BENCHMARK_TICKER = engine.BENCHMARK_TICKER

#: Inclusive ``YYYY-MM-DD`` bounds of the demo task's splits.
SPLITS = {name: [_DEMO_TASK[name]["start"], _DEMO_TASK[name]["end"]] for name in ("train", "validation", "test")}

DEMO_USERNAME = "demo"
DATASET_NAME = "Dow 30 daily 2010-2022"
BUDGET_NAME = "Demo budget"
#: The demo's task kind, chosen on validation scores only: in ``benchmarks/learning_quality.py``
#: (docs/results/learning-quality.md) the portfolio arms had the better validation score averaged over
#: the three windows (run 1: tournament 0.18, single pod 0.17, stock-trading single pod 0.09;
#: run 3, with the band: single pod 0.26, tournament 0.21, stock-trading single pod -0.08).
#: ``demo_setup --kind stock_trading`` runs the stock-trading task instead.
DEMO_KIND = "portfolio"
#: The intraday demo's algorithm: the default-selection rule (docs/default-selection.md) was
#: applied to daily bars only, so the 5-minute demo keeps the PPO it was sized with.
INTRADAY_ALGORITHM = "ppo"


def demo_algorithm(kind: str = DEMO_KIND, *, intraday: bool = False) -> str:
    """The algorithm ``demo_setup`` trains unless ``--algorithm`` names one: the default of a new
    task of ``kind`` (``engine.default_algorithm``: ``"direct"`` for the daily portfolio demo,
    docs/default-selection.md; ``"ppo"`` for stock trading), :data:`INTRADAY_ALGORITHM` intraday."""
    return INTRADAY_ALGORITHM if intraday else engine.default_algorithm(kind)


#: ``demo_algorithm()``: the daily demo's algorithm, ``"direct"``.
DEMO_ALGORITHM = demo_algorithm()


#: Task-name prefixes of the two demos: daily Dow 30, and ``demo_setup --intraday``.
DAILY_PREFIX = "Dow 30"
INTRADAY_PREFIX = "5-min AAPL MSFT NVDA"


def task_name(algorithm: str = DEMO_ALGORITHM, prefix: str = DAILY_PREFIX) -> str:
    """The demo task's name for ``algorithm`` (``"Dow 30 DIRECT demo"``, ``"5-min AAPL MSFT NVDA PPO demo"``)."""
    return f"{prefix} {algorithm.upper()} demo"


TASK_NAME = task_name()
RUN_NAME = task_name()
#: Names of the runs the demos start: the task's name and a number (``"Dow 30 TD3 demo #2"``).
DEMO_RUN_NAME = re.compile(rf"(?:{DAILY_PREFIX}|{INTRADAY_PREFIX}) [A-Z0-9]+ demo #\d+")
LEADERBOARD_SIZE = 5
FRESH_PROBABILITY = 0.1
#: PBT: a copied agent's learning rate and entropy weight are multiplied by 0.8 or 1.25
#: (PPO, A2C); :func:`demo_mutation` gives the off-policy algorithms' (actor and critic rates).
MUTATION = {
    "bounds": {"learning_rate": [1e-5, 3e-3], "ent_coef": [0.0, 0.1]},
    "factors": [0.8, 1.25],
    "probability": 1.0,
}
YAHOO_HOST = ("query1.finance.yahoo.com", 443)
#: Share of the measured learning rate a whole generation achieves: validation, checkpoint,
#: heartbeats and the web server's share of the cores (0.7-0.8 measured on a 2-core VM).
GENERATION_EFFICIENCY = 0.75
#: The wall-clock backstop allows this many times the planned training time: the 4 s measurement
#: runs on idle workers, while the run shares the cores with the web server, the cpu worker and
#: whatever else the machine does (a loaded 2-core VM trained at 79 % of the plan). With twice
#: the time, the env-step cap ends the run unless it trains at less than half the measured rate.
WALL_CLOCK_MARGIN = 2.0


@dataclass(frozen=True)
class DemoProfile:
    """How big a demo tournament is on one kind of machine.

    Attributes:
        name: ``"cpu"``, ``"gpu"`` or ``"ci"``.
        num_pods: the training pool (generations wanted at once).
        hyperparameters: the settings of ``algorithm`` sized for the machine (PPO: env count,
            rollout length); the rest keep the defaults.
        training_s: seconds of training the whole run should take (budget wall clock).
        generation_s: seconds one generation should take; sets ``generation_steps``.
        tickers: tickers to trade (``None``: every ticker of the dataset).
        generation_steps: fixed env steps per generation (``None``: from the measured rate).
        generations: fixed number of generations of the run (``None``: from ``training_s``).
        kind: the task kind, ``"portfolio"`` (:data:`DEMO_KIND`) or ``"stock_trading"``.
        algorithm: the trainer's algorithm, PPO for the profiles below (``demo_setup`` sets the
            one it trains: ``--algorithm``, else :func:`demo_algorithm`); the hyperparameters it
            does not have (an off-policy algorithm's ``rollout_steps``) are left out for it.
        intraday: the 5-minute demo (``demo_setup --intraday``): its data, splits, names and
            budget (:data:`INTRADAY_SPLITS`, :data:`INTRADAY_BUDGET_NAME`).
        reward_scale: PPO's reward scale of the portfolio env's log returns (``None``:
            :data:`PORTFOLIO_REWARD_SCALE`).
    """

    name: str
    num_pods: int
    hyperparameters: dict[str, Any]
    training_s: float
    generation_s: float
    tickers: tuple[str, ...] | None = None
    generation_steps: int | None = None
    generations: int | None = None
    kind: str = "portfolio"
    algorithm: str = "ppo"
    intraday: bool = False
    reward_scale: float | None = None

    @property
    def prefix(self) -> str:
        return INTRADAY_PREFIX if self.intraday else DAILY_PREFIX

    @property
    def splits(self) -> dict[str, list[str]]:
        return INTRADAY_SPLITS if self.intraday else SPLITS

    @property
    def budget_name(self) -> str:
        return INTRADAY_BUDGET_NAME if self.intraday else BUDGET_NAME

    @property
    def rollout_batch(self) -> int:
        """Env steps of one learning chunk, of which generations are whole multiples: one
        rollout (``num_envs * rollout_steps``) for PPO and A2C, one vector step (``num_envs``)
        for the off-policy algorithms (``engine.min_env_steps``)."""
        return engine.min_env_steps(
            self.algorithm, engine.validate_hyperparameters(self.algorithm, _hyperparameters(self))
        )


#: PPO's reward scale for the portfolio env's daily log returns (~0.01), as in the benchmark.
PORTFOLIO_REWARD_SCALE = 100.0

#: A 2-core CPU: 256 envs per pod, PPO's default networks (64x64) and epochs (2), which train
#: about 5x the env steps of 128x128 networks in the same time and score a better validation
#: Sharpe on Dow-30 (0.81-0.90 against 0.66); 25 s generations, 8 minutes of training.
CPU_PROFILE = DemoProfile(
    name="cpu",
    num_pods=4,
    hyperparameters={"num_envs": 256, "rollout_steps": 16},
    training_s=480.0,
    generation_s=25.0,
)
#: One or more GPUs: 16,384 envs per pod (1,024 envs leave a GPU's SMs mostly idle: the step is
#: launch-bound below ~16k; issue 27's estimate for an H200 is 20-30 M PPO env-steps/s at
#: 65,536), PPO's default networks and epochs; 5 minutes of training. Not yet measured on a GPU.
GPU_PROFILE = DemoProfile(
    name="gpu",
    num_pods=4,
    hyperparameters={"num_envs": 16384, "rollout_steps": 16},
    training_s=300.0,
    generation_s=15.0,
)
#: The acceptance test: 2 pods, 5 tickers, tiny networks, 8 generations of 2,048 env steps.
CI_PROFILE = DemoProfile(
    name="ci",
    num_pods=2,
    hyperparameters={"num_envs": 32, "rollout_steps": 16, "hidden_sizes": [32, 32]},
    training_s=150.0,
    generation_s=5.0,
    tickers=("AAPL", "JPM", "KO", "MSFT", "WMT"),
    generation_steps=2048,
    generations=8,
)


#: ``demo_setup --intraday``: 5-minute bars of AAPL, MSFT and NVDA (regular session), QQQ's
#: bars of the same file as the benchmark. Train 2024-03-11..2025-06-30 (330 sessions),
#: validation 2025-07..2025-12, test 2026-01-02..2026-08-21 (the file's last day).
INTRADAY_FILE = "intraday_5min_ib_2024-03-11_2026-08-21.csv.gz"
INTRADAY_TICKERS = ("AAPL", "MSFT", "NVDA")
INTRADAY_DATASET_NAME = "AAPL MSFT NVDA 5-minute 2024-2026"
INTRADAY_BUDGET_NAME = "Intraday demo budget"
INTRADAY_SPLITS = {
    "train": ["2024-03-11", "2025-06-30"],
    "validation": ["2025-07-01", "2025-12-31"],
    "test": ["2026-01-02", "2026-08-21"],
}
#: 5-minute log returns are about a ninth of daily ones (sqrt(78)); the reward is scaled up by
#: as much to keep PPO's rewards the size of the daily demo's (chosen from that ratio alone).
INTRADAY_REWARD_SCALE = 1000.0
#: A 2-core CPU: the daily CPU profile's networks and envs, 15 s generations, 3 minutes of
#: training (a generation also validates on ~9,800 bars of 2025's second half).
INTRADAY_CPU_PROFILE = DemoProfile(
    name="cpu",
    num_pods=2,
    hyperparameters={"num_envs": 256, "rollout_steps": 16},
    training_s=180.0,
    generation_s=15.0,
    intraday=True,
    reward_scale=INTRADAY_REWARD_SCALE,
)
INTRADAY_GPU_PROFILE = DemoProfile(
    name="gpu",
    num_pods=4,
    hyperparameters={"num_envs": 16384, "rollout_steps": 16},
    training_s=180.0,
    generation_s=15.0,
    intraday=True,
    reward_scale=INTRADAY_REWARD_SCALE,
)


#: The learning-quality benchmark's tournament budget, chosen on validation
#: (docs/results/learning-quality.md, run 4: 262,144 env steps per generation scored 0.414
#: against 0.286 for 65,536): 3 pods x 3 generations, 2,359,296 env steps per run. The daily portfolio PPO demo is the
#: configuration the benchmark studied and trains exactly this budget; sized by time instead, it
#: trained up to ten times as much on the 2-core VM (22 M env steps), a budget no study looked at.
BENCHMARK_BUDGET = {"num_pods": 3, "generation_steps": 262_144, "generations": 9}


#: The daily portfolio demo with the direct learner: the configuration docs/default-selection.md
#: chose on validation (``direct`` with its defaults, the recommended band, 2M env steps:
#: ``services.default_generation_steps``, 94 gradient steps of 1,024 windows x 21 days) as every
#: fresh agent's generation, 3 pods x 2 generations each (each pod's second generation continues
#: from the leaderboard), 12,128,256 env steps per run. One such training took 21.5-24.6 s of one
#: CPU core on this task (``trainer/agents/direct.py``); the run's wall clock is not yet measured.
DIRECT_BUDGET = {"num_pods": 3, "generation_steps": 94 * 1024 * 21, "generations": 6}


def with_benchmark_budget(profile: DemoProfile) -> DemoProfile:
    """``profile`` with the budget a benchmark chose on validation for its configuration, on any
    machine: the daily portfolio task with PPO gets :data:`BENCHMARK_BUDGET`; with ``direct``,
    the default (docs/default-selection.md), :data:`DIRECT_BUDGET` and direct's default
    hyperparameters (the profile's are PPO's sizes). Other kinds, algorithms and the intraday
    demo keep their time-based sizing (:func:`~webapp.demo.sizing.size_run`)."""
    if profile.kind != "portfolio" or profile.intraday:
        return profile
    if profile.algorithm == "ppo":
        return dataclasses.replace(profile, **BENCHMARK_BUDGET)
    if profile.algorithm == "direct":
        return dataclasses.replace(profile, hyperparameters={}, **DIRECT_BUDGET)
    return profile


def _hyperparameters(profile: DemoProfile) -> dict[str, Any]:
    hp = dict(profile.hyperparameters)
    if profile.kind == "portfolio":
        hp.setdefault("reward_scale", profile.reward_scale or PORTFOLIO_REWARD_SCALE)
    own = engine.validate_hyperparameters(profile.algorithm, {})
    return {k: v for k, v in hp.items() if k in own}


def demo_mutation(algorithm: str) -> dict[str, Any]:
    """The demo run's PBT mutation for ``algorithm``: :data:`MUTATION`'s bounds that it has,
    else (SAC, TD3, DDPG) its actor and critic learning rates in the same range."""
    own = engine.validate_hyperparameters(algorithm, {})
    bounds = {k: v for k, v in MUTATION["bounds"].items() if k in own}
    if not bounds:
        low_high = MUTATION["bounds"]["learning_rate"]
        bounds = {k: list(low_high) for k in ("actor_learning_rate", "critic_learning_rate") if k in own}
    return {**MUTATION, "bounds": bounds}


def _task_spec(dataset: Dataset, profile: DemoProfile) -> dict[str, Any]:
    splits = profile.splits
    daily_portfolio = profile.kind == "portfolio" and not profile.intraday
    return {
        "data": {"paths": dataset.source_paths(), "tickers": list(profile.tickers or dataset.tickers)},
        "train": splits["train"],
        "validation": splits["validation"],
        "test": splits["test"],
        "kind": profile.kind,
        "algorithm": profile.algorithm,
        "hyperparameters": _hyperparameters(profile),
        # daily portfolio demos trade with the band chosen on validation
        # (docs/results/learning-quality.md); intraday bars were not studied and keep the env's default (none)
        **({"env": {"rebalance_band": engine.recommended_rebalance_band()}} if daily_portfolio else {}),
    }
