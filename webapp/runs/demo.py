"""The demo: Dow-30 data, a demo budget and a PPO (or ``--algorithm``) tournament sized to this machine.

``manage.py demo_setup`` (run by ``./paddock demo``) and the acceptance test
(``tests/e2e/test_acceptance.py``) both build on these definitions:

* **Data.** The Dow 30 daily prices (2010-01-04 to 2022-11-15) and QQQ, the benchmark, are
  read from ``PADDOCK_DATA_DIR``. When a file is absent and Yahoo Finance answers, it is
  downloaded once with ``trainer.data.download_yfinance`` into that folder; offline, the
  command stops with a message saying which files to copy where. The dataset keeps the tickers
  with full history from the first day of the file: DOW (listed 2019-03-20) is dropped, and a
  note on the dataset says so.
* **Task.** PPO (``demo_setup --algorithm`` trains A2C, SAC, TD3 or DDPG instead); train 2010-01-01 to 2019-12-31, validation 2020, test 2021-01-01 to
  2022-11-15 (held out: backtested against QQQ when the run ends).
* **Sizing.** The chosen algorithm's training rate is measured for a few seconds on the device the training
  workers use; a generation is sized to last about :attr:`DemoProfile.generation_s` and the run
  to train for about :attr:`DemoProfile.training_s` in all (about 8 minutes on a 2-core CPU, 5
  with a GPU, where the profile also trains 4x as many envs).
* **Idempotence.** The dataset, the budget and the task are created once per user and reused.
  A demo run that is still active (running, paused or finishing, and within its wall-clock
  limit) is reused: running the demo again while it trains just prints its page again. Only
  runs the demo started count (the demo task, named ``"Dow 30 PPO demo #N"``): the user's own
  runs on the demo budget are never taken for it, nor stopped by ``--new-run``. Otherwise a
  new run starts, and the budget's env-step cap is raised by what the new run may use (the cap
  counts the budget's whole life, so an unchanged cap would be spent by the first demo run).
"""

from __future__ import annotations

import logging
import math
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from webapp import engine
from webapp.core.errors import AppError
from webapp.market.models import Dataset
from webapp.market.services import dataset_create_from_files
from webapp.runs import services
from webapp.runs.models import ClusterBudget, Run, Task

logger = logging.getLogger(__name__)

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
DEMO_ALGORITHM = "ppo"


def task_name(algorithm: str = DEMO_ALGORITHM) -> str:
    """The demo task's name for ``algorithm`` (``"Dow 30 PPO demo"``)."""
    return f"Dow 30 {algorithm.upper()} demo"


TASK_NAME = task_name()
RUN_NAME = task_name()
#: Names of the runs the demo starts: the task's name and a number (``"Dow 30 TD3 demo #2"``).
DEMO_RUN_NAME = re.compile(r"Dow 30 [A-Z0-9]+ demo #\d+")
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
        hyperparameters: PPO settings (env count, rollout length); the rest keep the defaults.
        training_s: seconds of training the whole run should take (budget wall clock).
        generation_s: seconds one generation should take; sets ``generation_steps``.
        tickers: tickers to trade (``None``: every ticker of the dataset).
        generation_steps: fixed env steps per generation (``None``: from the measured rate).
        generations: fixed number of generations of the run (``None``: from ``training_s``).
        kind: the task kind, ``"portfolio"`` (:data:`DEMO_KIND`) or ``"stock_trading"``.
        algorithm: the trainer's algorithm (``demo_setup --algorithm``); the hyperparameters it
            does not have (an off-policy algorithm's ``rollout_steps``) are left out for it.
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
    algorithm: str = DEMO_ALGORITHM

    @property
    def rollout_batch(self) -> int:
        """Env steps of one learning chunk, of which generations are whole multiples: one
        rollout (``num_envs * rollout_steps``) for PPO and A2C, one vector step (``num_envs``)
        for the off-policy algorithms (``engine.min_env_steps``)."""
        return engine.min_env_steps(self.algorithm, _hyperparameters(self))


#: The demo's task kind, chosen on validation scores only: in ``benchmarks/learning_quality.py``
#: (README, "Learning quality") the portfolio tournament had the best validation score averaged
#: over the three windows (0.18; portfolio single pod 0.17, top-3 ensemble 0.13, stock-trading
#: single pod 0.09). ``demo_setup --kind stock_trading`` runs the stock-trading task instead.
DEMO_KIND = "portfolio"
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
#: One or more GPUs: 1,024 envs per pod (the GPU's parallelism), PPO's default networks and
#: epochs; 5 minutes of training.
GPU_PROFILE = DemoProfile(
    name="gpu",
    num_pods=4,
    hyperparameters={"num_envs": 1024, "rollout_steps": 16},
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


@dataclass(frozen=True)
class Sizing:
    """A profile turned into numbers for one machine.

    Attributes:
        steps_per_s: measured training rate of one pod (the profile's algorithm) (env steps per second), or
            ``None`` when nothing was measured.
        device: the device it was measured on.
        concurrent_pods: generations trained at once (training workers, at most ``num_pods``).
        generation_steps: env steps of one generation.
        generations: generations the run may train (the env-step cap divided by the above).
        max_wall_clock_s: the budget's wall-clock limit per run (the end of training).
    """

    steps_per_s: float | None
    device: str
    concurrent_pods: int
    generation_steps: int
    generations: int
    max_wall_clock_s: int

    @property
    def env_steps(self) -> int:
        """Env steps the run may train in all (its share of the budget's env-step cap)."""
        return self.generation_steps * self.generations


def size_run(profile: DemoProfile, *, steps_per_s: float | None, device: str, training_workers: int) -> Sizing:
    """Size a demo run from a measured training rate.

    A generation trains ``GENERATION_EFFICIENCY * steps_per_s * generation_s`` env steps (the
    measured rate leaves out a generation's validation and bookkeeping), rounded down to whole
    learning chunks (:attr:`DemoProfile.rollout_batch`, at least one); the run trains as many generations as fit in ``training_s`` with
    ``min(training_workers, num_pods)`` of them at once, and at least two per pod so that every
    pod continues from the leaderboard at least once. The env-step cap (``env_steps``) ends the
    run; the wall-clock limit, ``WALL_CLOCK_MARGIN * training_s`` plus one generation, is a
    backstop that ends it first only on a machine training at less than about half the measured
    rate.

    Args:
        profile: the demo's shape.
        steps_per_s: one pod's measured rate; ``None`` uses the profile's fixed numbers.
        device: where it was measured (reported only).
        training_workers: Celery workers consuming the training (``gpu``) queue.

    Raises:
        AppError: neither a measured rate nor fixed numbers in the profile.
    """
    concurrent = max(1, min(int(training_workers), profile.num_pods))
    batch = profile.rollout_batch
    if profile.generation_steps is not None:
        gen_steps = int(profile.generation_steps)
    elif steps_per_s is not None and steps_per_s > 0:
        gen_steps = max(1, int(steps_per_s * GENERATION_EFFICIENCY * profile.generation_s) // batch) * batch
    else:
        raise AppError("the demo needs a measured training rate", fields={"steps_per_s": "required"})
    if profile.generations is not None:
        generations = int(profile.generations)
    else:
        per_generation_s = gen_steps / (steps_per_s * GENERATION_EFFICIENCY) if steps_per_s else profile.generation_s
        fit = math.floor(profile.training_s * concurrent / max(per_generation_s, 1e-9))
        generations = max(2 * profile.num_pods, fit)
    wall = int(math.ceil(WALL_CLOCK_MARGIN * profile.training_s + profile.generation_s))
    return Sizing(
        steps_per_s=steps_per_s,
        device=device,
        concurrent_pods=concurrent,
        generation_steps=gen_steps,
        generations=generations,
        max_wall_clock_s=wall,
    )


# --- data ----------------------------------------------------------------------------------


@dataclass
class DemoFiles:
    """The demo's data files, relative to the data folder (the benchmark: absolute when
    ``PADDOCK_BENCHMARK_FILE`` lies elsewhere), and what happened to get them."""

    prices: str
    benchmark: str
    messages: list[str] = field(default_factory=list)


def data_dir() -> Path:
    """``PADDOCK_DATA_DIR``."""
    return Path(settings.PADDOCK_DATA_DIR)


def benchmark_file() -> str:
    """``PADDOCK_BENCHMARK_FILE`` relative to ``PADDOCK_DATA_DIR``, or its absolute path when
    it lies elsewhere (``root / benchmark_file()`` is then that path)."""
    path = Path(settings.PADDOCK_BENCHMARK_FILE)
    try:
        return str(path.relative_to(Path(settings.PADDOCK_DATA_DIR)))
    except ValueError:
        return str(path)


def _online(timeout: float = 5.0) -> str | None:
    """``None`` when Yahoo Finance answers a TCP connection, else why not."""
    try:
        with socket.create_connection(YAHOO_HOST, timeout=timeout):
            return None
    except OSError as exc:
        return f"{YAHOO_HOST[0]} cannot be reached ({exc.strerror or exc})"


def _offline_error(root: Path, missing: list[str], reason: str) -> AppError:
    names = ", ".join(missing)
    return AppError(
        f"the demo data is not in PADDOCK_DATA_DIR={root} (missing: {names}) and it cannot be downloaded: "
        f"{reason}. Copy the files there (see the README, section 'The demo'), point PADDOCK_DATA_DIR "
        "at a folder holding them, or connect this machine to the internet and run the demo again.",
        fields={"data": f"missing: {names}"},
    )


def _has_benchmark(path: Path) -> bool:
    """Whether a benchmark file holds QQQ on the first and last days of the test split."""
    try:
        frame = pd.read_csv(path, usecols=lambda c: c.strip().lower() in ("date", "tic"))
    except (OSError, ValueError):
        return False
    frame.columns = [c.strip().lower() for c in frame.columns]
    if "tic" in frame.columns:
        frame = frame[frame["tic"].astype(str).str.upper() == BENCHMARK_TICKER]
    if frame.empty:
        return False
    dates = pd.to_datetime(frame["date"])
    test_start, test_end = (pd.Timestamp(d) for d in SPLITS["test"])
    return dates.min() <= test_start + timedelta(days=7) and dates.max() >= test_end - timedelta(days=7)


def ensure_demo_files(
    root: Path | None = None, *, allow_download: bool = True, say: Callable[[str], None] = logger.info
) -> DemoFiles:
    """Find the Dow-30 and QQQ files in the data folder, downloading what is absent.

    Args:
        root: the data folder (default ``PADDOCK_DATA_DIR``); downloads are written there.
        allow_download: ``False`` never touches the network (absent files are an error).
        say: receives one line per step (the command prints them).

    Returns:
        The file names relative to ``root``.

    Raises:
        AppError: a file is absent and cannot be downloaded (offline, or Yahoo failed), or the
            benchmark file lacks QQQ over the test dates; the message says what to put where.
    """
    root = Path(root or data_dir())
    benchmark_name = benchmark_file()
    benchmark = root / benchmark_name
    files = DemoFiles(prices=DOW30_FILE, benchmark=benchmark_name)
    missing = []
    if not (root / DOW30_FILE).exists():
        if (root / DOW30_DOWNLOAD_FILE).exists():
            files.prices = DOW30_DOWNLOAD_FILE
        else:
            missing.append(DOW30_FILE)
    if not benchmark.exists():
        missing.append(benchmark_name)
    elif not _has_benchmark(benchmark):  # someone else's file: never overwritten
        raise AppError(
            f"{benchmark} does not hold {BENCHMARK_TICKER} prices from {SPLITS['test'][0]} to {SPLITS['test'][1]}, "
            "the backtests' benchmark; move it away to have it downloaded, or replace it",
            fields={"data": f"{benchmark_name}: no {BENCHMARK_TICKER} over the test dates"},
        )
    if not missing:
        return files
    if not allow_download:
        raise _offline_error(root, missing, "downloads are turned off")
    reason = _online()
    if reason is not None:
        raise _offline_error(root, missing, reason)
    if DOW30_FILE in missing:
        say(f"downloading the Dow 30 daily prices {DATA_START}..{DATA_END} from Yahoo Finance")
        info = engine.download_daily_bars(
            DOW30_TICKERS, start=DATA_START, end=DATA_END, out_path=root / DOW30_DOWNLOAD_FILE
        )
        files.prices = DOW30_DOWNLOAD_FILE
        files.messages.append(
            f"downloaded {info.rows} rows of {len(info.tickers)} tickers to {root / DOW30_DOWNLOAD_FILE}"
        )
    if benchmark_name in missing:
        say(f"downloading {BENCHMARK_TICKER} daily prices from Yahoo Finance (the backtests' benchmark)")
        benchmark.parent.mkdir(parents=True, exist_ok=True)
        info = engine.download_daily_bars([BENCHMARK_TICKER], start=DATA_START, end=DATA_END, out_path=benchmark)
        files.messages.append(f"downloaded {info.rows} rows of {BENCHMARK_TICKER} to {benchmark}")
    return files


def full_history_tickers(path: Path) -> tuple[list[str], dict[str, str]]:
    """Split a long price file's tickers into those with rows on its first and last day and
    the others.

    Returns:
        ``(kept, dropped)``: kept tickers sorted; ``dropped`` maps a ticker to its first and last
        day (``"2019-03-20..2022-11-15"``).
    """
    frame = pd.read_csv(path, usecols=["date", "tic"])
    frame["date"] = pd.to_datetime(frame["date"])
    first_day, last_day = frame["date"].min(), frame["date"].max()
    span = frame.groupby("tic")["date"].agg(["min", "max"])
    full = (span["min"] == first_day) & (span["max"] == last_day)
    kept = sorted(str(t) for t in span.index[full])
    dropped = {str(t): f"{row['min'].date()}..{row['max'].date()}" for t, row in span[~full].iterrows()}
    return kept, dropped


def import_demo_dataset(
    owner, *, root: Path | None = None, say: Callable[[str], None] = logger.info, allow_download: bool = True
) -> tuple[Dataset, bool]:
    """The owner's demo dataset: Dow 30 tickers with full history since 2010, created once.

    Args:
        owner: the user.
        root: the data folder (default ``PADDOCK_DATA_DIR``).
        say: progress lines.
        allow_download: fetch absent files from Yahoo Finance.

    Returns:
        ``(dataset, created)``.

    Raises:
        AppError: the files are absent and cannot be downloaded, or the loader rejects them.
    """
    root = Path(root or data_dir())
    files = ensure_demo_files(root, allow_download=allow_download, say=say)
    for line in files.messages:
        say(line)
    existing = Dataset.objects.filter(owner=owner, name=DATASET_NAME).first()
    if existing is not None:
        return existing, False
    kept, dropped = full_history_tickers(root / files.prices)
    notes = [
        f"{tic}: dropped from the demo dataset, its rows cover only {span} (the demo trades tickers "
        f"with full history from {DATA_START[:4]})"
        for tic, span in sorted(dropped.items())
    ]
    with transaction.atomic():
        dataset = dataset_create_from_files(owner=owner, name=DATASET_NAME, paths=[files.prices], tickers=kept)
        if notes:
            dataset.notes = [*notes, *dataset.notes]
            dataset.save(update_fields=["notes"])
    return dataset, True


# --- budget, task and run ------------------------------------------------------------------


def measure_rate(
    profile: DemoProfile, dataset: Dataset, *, device: str = "auto", seconds: float = 4.0
) -> dict[str, Any]:
    """Training rate of one pod of ``profile`` (its algorithm) on ``dataset`` (see
    ``engine.measure_training_throughput``); the processed data lands in the shared cache."""
    spec = engine.validate_task(_task_spec(dataset, profile))
    engine.configure_process(threads=settings.PADDOCK_TORCH_THREADS)  # as a training worker does
    return engine.measure_training_throughput(
        spec,
        device=device,
        seconds=seconds,
        data_dir=str(settings.PADDOCK_DATA_DIR),
        cache_dir=str(settings.PADDOCK_CACHE_DIR),
    )


def _hyperparameters(profile: DemoProfile) -> dict[str, Any]:
    hp = dict(profile.hyperparameters)
    if profile.kind == "portfolio":
        hp.setdefault("reward_scale", PORTFOLIO_REWARD_SCALE)
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
    return {
        "data": {"paths": dataset.source_paths(), "tickers": list(profile.tickers or dataset.tickers)},
        "train": SPLITS["train"],
        "validation": SPLITS["validation"],
        "test": SPLITS["test"],
        "kind": profile.kind,
        "algorithm": profile.algorithm,
        "hyperparameters": _hyperparameters(profile),
    }


def ensure_budget(owner, sizing: Sizing) -> tuple[ClusterBudget, bool]:
    """The owner's demo budget (created once), with limits for a new run of ``sizing``.

    ``max_concurrent_pods`` and ``max_wall_clock_s`` are set to the sizing; the env-step cap
    becomes what the budget has used so far plus the run's env steps.

    Returns:
        ``(budget, created)``.
    """
    with transaction.atomic():
        budget = ClusterBudget.objects.select_for_update().filter(owner=owner, name=BUDGET_NAME).first()
        created = budget is None
        if created:
            budget = services.budget_create(actor=owner, name=BUDGET_NAME, max_concurrent_pods=sizing.concurrent_pods)
        budget.max_concurrent_pods = sizing.concurrent_pods
        budget.max_wall_clock_s = sizing.max_wall_clock_s
        budget.env_step_cap = budget.env_steps_used + sizing.env_steps
        budget.save(update_fields=["max_concurrent_pods", "max_wall_clock_s", "env_step_cap"])
    return budget, created


def ensure_task(owner, dataset: Dataset, profile: DemoProfile) -> Task:
    """The owner's demo task for ``profile`` (reused when one with the same settings exists).

    Settings are compared in full, defaults filled in: a task made when PPO's defaults were
    different (wider networks, more epochs) is not reused."""
    tickers = list(profile.tickers or dataset.tickers)
    wanted = engine.validate_task(_task_spec(dataset, profile))["hyperparameters"]
    name = task_name(profile.algorithm)
    for task in Task.objects.filter(
        owner=owner, name=name, dataset=dataset, algorithm=profile.algorithm, kind=profile.kind
    ):
        same_hp = task.hyperparameters == wanted
        if task.tickers == tickers and same_hp and task.splits["test"]["end"] == SPLITS["test"][1]:
            return task
    return services.task_create(
        owner=owner,
        dataset=dataset,
        name=name,
        tickers=tickers,
        splits=SPLITS,
        algorithm=profile.algorithm,
        hyperparameters=_hyperparameters(profile),
        kind=profile.kind,
    )


def is_demo_run(run: Run) -> bool:
    """Whether ``run`` is one the demo started: on the demo budget and task, named as
    :func:`start_demo_run` names them (``"Dow 30 PPO demo #3"``)."""
    name = task_name(run.task.algorithm)
    return bool(
        run.budget.name == BUDGET_NAME
        and run.task.name == name
        and DEMO_RUN_NAME.fullmatch(run.name)
        and run.name.startswith(f"{name} #")
    )


def active_demo_run(owner) -> Run | None:
    """The owner's demo run that is still going (started, not ended, within its wall-clock
    limit), if any.

    Only runs the demo started count: a run of the owner's own on the demo budget (or on the
    demo task), or a demo run that was created but never started, is left alone."""
    now = timezone.now()
    candidates = Run.objects.filter(
        owner=owner,
        budget__name=BUDGET_NAME,
        task__name__regex=r"^Dow 30 [A-Z0-9]+ demo$",
        status__in=Run.ACTIVE,
    ).select_related("budget", "task")
    for run in candidates.order_by("-created_at", "-id"):
        if not is_demo_run(run):
            continue
        limit = run.budget.max_wall_clock_s
        started = run.started_at or run.created_at
        if limit is None or now - started < timedelta(seconds=limit + 60):
            return run
    return None


def start_demo_run(owner, dataset: Dataset, profile: DemoProfile, sizing: Sizing) -> tuple[Run, ClusterBudget]:
    """Create and start a demo run (its budget topped up for it).

    Raises:
        AppError: the task, run or budget is refused (naming the field).
    """
    task = ensure_task(owner, dataset, profile)
    budget, _ = ensure_budget(owner, sizing)
    seed = Run.objects.filter(owner=owner, budget=budget).count()
    run = services.run_create(
        owner=owner,
        task=task,
        budget=budget,
        name=f"{task.name} #{seed + 1}",
        num_pods=profile.num_pods,
        generation_steps=sizing.generation_steps,
        leaderboard_size=LEADERBOARD_SIZE,
        fresh_probability=FRESH_PROBABILITY,
        mutation=demo_mutation(profile.algorithm),
        seed=seed,
    )
    run = services.run_start(run=run)
    return run, budget
