"""Tournament vs single pod vs seed ensemble at equal compute, on the walk-forward (issue 25, section 5).

**Question.** Given the same compute, does the product's tournament (several pods, a
leaderboard, SE-aware parent choice, PBT mutation, a one-SE ensemble as the deliverable) give a
better out-of-sample record than simply training one agent longer, or than averaging
independently trained seeds? Each arm's stitched test record is compared with 1/N, and the
tournament is compared *paired* with each of the other two on the same days.

**Protocol** (written before any test figure was computed; ``docs/results/learning-quality.md``):

* Learner: ``direct`` (:mod:`trainer.agents.direct`) with **its default hyperparameters**
  (nothing is passed; the defaults in force are printed), portfolio tasks, the env's
  ``rebalance_band`` = :data:`~trainer.envs.portfolio_config.RECOMMENDED_REBALANCE_BAND` (the
  product's band for new portfolio tasks), every other env setting at its default.
* **Equal compute**: every arm gets ``G = 6`` trainings of ``S`` env steps per fold (``S`` =
  1,000,000 by default, ``--steps``; the direct learner rounds up to whole gradient steps of
  ``num_envs x rollout_steps`` = 21,504 env steps, 47 of them), counted and printed per arm:

  - ``single pod``: one pod, 6 generations, each continuing its own agent; the deliverable is
    the last agent (what a one-pod run holds at its end);
  - ``seed ensemble``: 6 fresh agents of seeds ``1000 s + i`` (``i`` = 0..5), one generation
    each; the deliverable is the mean-action ensemble of all 6
    (:func:`trainer.artifacts.ensemble.build_ensemble`, as the product builds ensembles);
    ``seed argmax`` (the member with the best validation score) is reported too;
  - ``tournament``: 3 pods x 2 generations with the product's rules
    (:func:`learning_quality.tournament_board`): every pod's first generation is fresh (pods
    that start together); later, :func:`trainer.tournament.select_parent` with every entry's
    score, SE and validation sub-windows and the pod's own (parents sampled by
    ``exp((score - best) / SE)``, a pod replaces its agent only by one better by more than one
    paired SE), fresh probability 0.1 and a leaderboard of 5 (the web app's run defaults); a
    copied parent is mutated by x0.8 or x1.25 within :data:`DIRECT_BOUNDS`: the web app's
    default mutation for direct (``webapp/runs/algorithms.py`` ``default_mutation``: the
    learning rate in [1e-5, 1e-2]) **plus** direct's ``turnover_penalty`` and
    ``tracking_penalty`` in ``[0, 2 x default]``, since they are the learner's main knobs (the
    product's default mutation does not move them: this arm is the product's rules with that
    one addition). The deliverable is the ensemble of every leaderboard agent within one SE of
    the best (:func:`trainer.tournament.one_se_members`; the best agent alone when it is the
    only one), as the web app builds at the end of a run.

  The three arms' first agents share seeds (``1000 s``, ``1000 s + 1``, ...): common random
  numbers, so the paired comparisons measure the rules, not the luck of the first draws.
* Markets: the synthetic ``placebo`` (IC 0, seed 0) and ``planted`` (IC 0.05, seed 0) of
  :mod:`synthetic_market`, 10 tickers 2010-01-04..2016-12-30, anchored yearly folds tested on
  2013..2016 (as :mod:`walk_forward_check`); the real Dow 30 (:data:`default_selection.FILES`,
  2010-01-04..2022-11-15, folds tested from 2014; ``--max-folds 3``: 2014..2016). Folds:
  :func:`trainer.data.folds.plan_folds` (252 validation days, 5-day gaps).
* Figures, per arm and market, on the test spans stitched over folds: Sharpe ratio; Sharpe
  difference against the cost-free 1/N and against 1/N traded with the task's costs and band
  (:func:`trainer.backtest.equal_weight.traded_equal_weight_returns`), each with its 95 %
  interval, one-sided p-value and verdict (:func:`trainer.backtest.relative.vs_equal_weight`:
  HAC standard error, circular block bootstrap); mean daily turnover. Paired:
  ``vs_equal_weight(tournament, single pod)`` and ``vs_equal_weight(tournament, seed
  ensemble)`` on the same days: "beats" means the tournament's Sharpe ratio is higher with the
  interval above 0.
* Nothing selects on test figures: every choice inside an arm uses validation scores only.

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/tournament_equal_compute.py \\
        [--markets placebo planted dow30] [--max-folds K] [--steps 1000000] [--seeds 0 ...] \\
        [--data-dir DIR] [--json OUT]

``--quick``: one fold of the placebo, 1 gradient step per training (a smoke run of seconds; its
numbers mean nothing).

Sources: Liu et al. 2021, "ElegantRL-Podracer" (arXiv 2112.05923), the tournament;
Jaderberg et al. 2017, "Population Based Training of Neural Networks" (arXiv 1711.09846), the
mutation; Breiman et al. 1984 / Hastie et al. 2009 section 7.10, the one-SE rule;
Lakshminarayanan et al. 2017, "Simple and Scalable Predictive Uncertainty Estimation using Deep
Ensembles" (arXiv 1612.01474), seed ensembles as the baseline to beat; DeMiguel, Garlappi &
Uppal 2009, 1/N; Ledoit & Wolf 2008, the Sharpe-difference test behind ``vs_equal_weight``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

import default_selection  # noqa: E402
import walk_forward_check  # noqa: E402
from default_selection import Scored, score_checkpoint, stitched  # noqa: E402
from learning_quality import Lineage, single_pod, tournament_board  # noqa: E402
from synthetic_market import generate, write_csv  # noqa: E402

from trainer import tournament  # noqa: E402
from trainer.agents import ALGORITHMS  # noqa: E402
from trainer.artifacts.ensemble import build_ensemble  # noqa: E402
from trainer.backtest.relative import vs_equal_weight  # noqa: E402
from trainer.data.folds import plan_folds  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.data.spec import DataSpec  # noqa: E402
from trainer.envs.portfolio_config import RECOMMENDED_REBALANCE_BAND  # noqa: E402
from trainer.task import TaskSpec  # noqa: E402
from trainer.util.device import set_cpu_threads  # noqa: E402

#: Trainings per arm and fold (the equal compute), and the tournament's shape.
TRAININGS = 6
PODS, GENERATIONS = 3, 2
#: The web app's run defaults (webapp/runs/models.py Run.leaderboard_size, fresh_probability).
LEADERBOARD, FRESH_PROBABILITY = 5, 0.1
PLANTED_IC, SYNTHETIC_SEED = 0.05, 0
MARKETS = ("placebo", "planted", "dow30")
ARMS = ("single pod", "seed ensemble", "seed argmax", "tournament")
#: one direct gradient step at the defaults (1,024 windows x 21 days): the --quick budget
QUICK_STEPS = 21_504


def direct_defaults() -> dict[str, Any]:
    """DirectConfig's defaults in this checkout (nothing is overridden; printed with the results)."""
    return ALGORITHMS["direct"][1]().to_dict()


def direct_bounds(defaults: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The tournament's mutation bounds for direct: the web app's default (the learning rate in
    [1e-5, 1e-2], ``webapp/runs/algorithms.py``) plus the two penalties in [0, 2 x default]."""
    return {
        "learning_rate": (1e-5, 1e-2),
        "turnover_penalty": (0.0, 2.0 * float(defaults["turnover_penalty"])),
        "tracking_penalty": (0.0, 2.0 * float(defaults["tracking_penalty"])),
    }


def load_market(name: str, data_dir: str, work: Path):
    """``(data path for the task, start, end, first test year, MarketData)`` of a market name."""
    if name == "dow30":
        start, end, first = default_selection.START, default_selection.END, default_selection.FIRST_TEST_YEAR
        path = str(Path(data_dir) / default_selection.FILES["dow30"])
    else:
        start, end, first = walk_forward_check.START, walk_forward_check.END, walk_forward_check.FIRST_TEST_YEAR
        ic = 0.0 if name == "placebo" else PLANTED_IC
        path = str(write_csv(generate(SYNTHETIC_SEED, ic=ic, start=start, end=end), work / f"{name}.csv.gz"))
    market = load_market_data(DataSpec(paths=[path], start=start, end=end), data_dir=None)
    return path, start, end, first, market


def fold_task(path: str, start: str, end: str, fold) -> TaskSpec:
    """The direct portfolio task of one fold: the product's band, the learner's defaults."""
    return TaskSpec.from_dict(
        {
            "data": {"paths": [path], "start": start, "end": end},
            **fold.splits(),
            "kind": "portfolio",
            "env": {"rebalance_band": RECOMMENDED_REBALANCE_BAND},
            "algorithm": "direct",
            "hyperparameters": {},
        }
    )


def deliverable(paths: list[Path], out: Path) -> Path:
    """One checkpoint, or the mean-action ensemble checkpoint of several."""
    if len(paths) == 1:
        return paths[0]
    build_ensemble(paths, out)
    return out


def train_fold(task: TaskSpec, market, work: Path, steps: int, seed: int, bounds) -> dict[str, Any]:
    """The three arms on one fold: arm -> {"checkpoint", "env_steps", "seconds", ...}."""
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    lineage = Lineage(task, market, work / "single", steps)
    lineage.workdir.mkdir(parents=True)
    done = single_pod(lineage, TRAININGS, seed)
    out["single pod"] = {
        "checkpoint": done[-1][0],
        "env_steps": lineage.env_steps,
        "seconds": time.perf_counter() - t0,
        "validation_scores": [s for _, s in done],
    }

    t0 = time.perf_counter()
    lineage = Lineage(task, market, work / "seeds", steps)
    lineage.workdir.mkdir(parents=True)
    members = [lineage.generation(seed=seed * 1000 + i) for i in range(TRAININGS)]
    seconds = time.perf_counter() - t0
    out["seed ensemble"] = {
        "checkpoint": deliverable([p for p, _ in members], work / "seed-ensemble.pt"),
        "env_steps": lineage.env_steps,
        "seconds": seconds,
        "validation_scores": [s for _, s in members],
    }
    best = max(range(TRAININGS), key=lambda i: members[i][1])
    out["seed argmax"] = {"checkpoint": members[best][0], "env_steps": lineage.env_steps, "seconds": seconds}

    t0 = time.perf_counter()
    lineage = Lineage(task, market, work / "tournament", steps)
    lineage.workdir.mkdir(parents=True)
    board = tournament_board(
        lineage,
        PODS,
        GENERATIONS,
        seed,
        bounds=bounds,
        leaderboard=LEADERBOARD,
        fresh_probability=FRESH_PROBABILITY,
    )
    by_id = {e.agent_id: p for p, e in board}
    chosen = tournament.one_se_members([e for _, e in board])
    out["tournament"] = {
        "checkpoint": deliverable([by_id[e.agent_id] for e in chosen], work / "tournament-ensemble.pt"),
        "env_steps": lineage.env_steps,
        "seconds": time.perf_counter() - t0,
        "board": [(e.agent_id, e.score, e.se) for _, e in board],
        "members": [e.agent_id for e in chosen],
        "hyperparameters": [
            {k: r.hyperparameters[k] for k in bounds} | {"generation": r.generation} for r in lineage.results
        ],
    }
    return out


def _cell(rel: dict[str, Any]) -> str:
    low, high = rel["ci95"]
    return f"{rel['sharpe_difference']:+.2f} [{low:+.2f}, {high:+.2f}], p {rel['p_value']:.2f}, {rel['verdict']}"


def market_report(name: str, rows: dict[str, list[Scored]], seed: int) -> tuple[list[str], dict[str, Any]]:
    """The markdown table of one market and seed, and its JSON figures."""
    report: dict[str, Any] = {"arms": {}, "paired": {}}
    first = rows["single pod"]
    days = sum(r.test_returns.size for r in first)
    dates = f"{first[0].test_dates[0]}..{first[-1].test_dates[-1]}"
    lines = [
        f"#### {name}, seed {seed}: {len(first)} folds, test {dates} ({days} days)",
        "",
        "| arm | test Sharpe | vs 1/N cost-free: diff [95 % CI], p, verdict | vs 1/N with costs and band "
        "| turnover/day | validation diff vs 1/N |",
        "|---|---:|---|---|---:|---:|",
    ]
    for arm in ARMS:
        rec = stitched(rows[arm], seed=seed)
        turnover = float(
            np.average([r.test_turnover for r in rows[arm]], weights=[r.test_returns.size for r in rows[arm]])
        )
        validation = float(np.mean([r.validation_difference for r in rows[arm]]))
        report["arms"][arm] = {**rec, "test_turnover": turnover, "validation_difference_mean": validation}
        lines.append(
            f"| {arm} | {rec['vs_cost_free']['sharpe_ratio']:.2f} | {_cell(rec['vs_cost_free'])} | "
            f"{_cell(rec['vs_with_costs'])} | {100 * turnover:.2f} % | {validation:+.2f} |"
        )
    ref = stitched(first, seed=seed)
    lines.append(f"| 1/N cost-free | {ref['vs_cost_free']['benchmark_sharpe_ratio']:.2f} | - | - | - | - |")
    lines.append(f"| 1/N with costs and band | {ref['vs_with_costs']['benchmark_sharpe_ratio']:.2f} | - | - | - | - |")
    tour = np.concatenate([r.test_returns for r in rows["tournament"]])
    lines += ["", "| paired (same days) | Sharpe difference [95 % CI], p, verdict |", "|---|---|"]
    for other in ("single pod", "seed ensemble"):
        b = np.concatenate([r.test_returns for r in rows[other]])
        rel = vs_equal_weight(tour, b, periods_per_year=252, seed=seed)
        report["paired"][f"tournament vs {other}"] = rel
        lines.append(f"| tournament vs {other} | {_cell(rel)} |")
    return lines, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markets", nargs="+", default=list(MARKETS), choices=MARKETS)
    parser.add_argument("--max-folds", type=int, help="at most this many folds per market (the first ones)")
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps of one training (default 1,000,000)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: one placebo fold, one gradient step a training"
    )
    parser.add_argument("--data-dir", default=os.environ.get("PADDOCK_DATA_DIR", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--json", help="write every figure to this file")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.max_folds is not None and args.max_folds < 1:
        parser.error("--max-folds must be >= 1")
    if args.quick:
        args.markets, args.max_folds, args.steps = ["placebo"], 1, QUICK_STEPS
    set_cpu_threads()
    started = time.monotonic()
    defaults = direct_defaults()
    bounds = direct_bounds(defaults)
    shown = {k: defaults[k] for k in ("learning_rate", "turnover_penalty", "tracking_penalty", "variance_penalty")}
    print(
        f"# tournament vs single pod vs seed ensemble: {TRAININGS} trainings x {args.steps:,} env steps per arm "
        f"and fold; direct defaults {shown}; band {RECOMMENDED_REBALANCE_BAND:g}; mutation bounds {bounds}; "
        f"seeds {args.seeds}\n",
        flush=True,
    )
    report: dict[str, Any] = {
        "steps": args.steps,
        "trainings": TRAININGS,
        "direct_defaults": defaults,
        "bounds": bounds,
        "markets": {},
    }
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="paddock-tournament-") as tmp:
        work = Path(tmp)
        for name in args.markets:
            path, start, end, first_year, market = load_market(name, args.data_dir, work)
            folds = plan_folds(market.dates, start=start, end=end, first_test_year=first_year, max_folds=args.max_folds)
            for seed in args.seeds:
                rows: dict[str, list[Scored]] = {arm: [] for arm in ARMS}
                folds_out = []
                for fold in folds:
                    fold_seed = seed + 1000 * fold.index  # distinct agents per fold, the arms' shared per fold
                    fold_work = work / name / f"seed{seed}" / f"fold{fold.index}"
                    arms = train_fold(
                        fold_task(path, start, end, fold), market, fold_work, args.steps, fold_seed, bounds
                    )
                    for arm in ARMS:
                        info = arms[arm]
                        rows[arm].append(
                            score_checkpoint(
                                info["checkpoint"], name, market, fold.index, arm, seed, info["seconds"],
                                traded_costs=True,
                            )
                        )  # fmt: skip
                    t = arms["tournament"]
                    board = ", ".join(f"{a}: {s:+.2f} ± {se:.2f}" for a, s, se in t["board"])
                    print(
                        f"{name} seed {seed} fold {fold.index} (test {fold.test[0]}..{fold.test[1]}): env steps "
                        + ", ".join(f"{a} {arms[a]['env_steps']:,} ({arms[a]['seconds']:.0f} s)" for a in ARMS[:2])
                        + f", tournament {t['env_steps']:,} ({t['seconds']:.0f} s); board {board}; "
                        f"one-SE members {t['members']}; {time.monotonic() - started:.0f} s",
                        flush=True,
                    )
                    folds_out.append(
                        {
                            "fold": fold.index,
                            "test": list(fold.test),
                            **{
                                arm: {k: v for k, v in arms[arm].items() if k != "checkpoint"}
                                for arm in ("single pod", "seed ensemble", "tournament")
                            },
                        }
                    )
                table, figures = market_report(name, rows, seed)
                lines += [*table, ""]
                print("\n" + "\n".join(table) + "\n", flush=True)
                report["markets"].setdefault(name, {})[str(seed)] = {**figures, "folds": folds_out}
    if len(args.markets) * len(args.seeds) > 1:  # every table again, together
        print("\n".join(lines))
    wall = time.monotonic() - started
    print(f"wall time {wall:.0f} s")
    report["wall_s"] = wall
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
