"""Honesty check of the walk-forward statistics on synthetic markets (issue 24, section 4).

On ``--seeds`` placebo markets (nothing predicts returns) and as many with a planted reversal
edge of information coefficient ``--ic`` (:mod:`synthetic_market`), 10 tickers 2010-01-04 ..
2016-12-30, anchored yearly folds tested on 2013 .. 2016 (:func:`trainer.data.folds.plan_folds`,
252 validation days, 5-day gaps), it runs two strategies through the same walk-forward:

* ``tilt``: the oracle-free baseline that uses the planted feature: three candidates (tilt
  strengths 0.25, 0.5, 1), the best on each fold's validation span by Sharpe ratio is tested on
  the next year, cost-free; its stitched record goes through
  :func:`trainer.backtest.relative.vs_equal_weight` against the cost-free 1/N, and PBO over the
  three candidates' test returns;
* ``learner`` (with ``--learner``): ``python -m trainer walk-forward --env portfolio`` on the
  generated CSV (PPO, ``--candidates`` agents of ``--env-steps`` env steps per fold), in
  ``--jobs`` processes at once (PPO with 64 envs, 32-step rollouts, 64x64 networks, CPU);
  ``--algo direct`` runs the direct-gradient learner with its own defaults instead.

Pass criteria: on the placebo the verdict is ``indistinguishable`` or ``trails`` in at least 19
of 20 seeds; on the planted edge the interval lies above 0. Prints one markdown table per strategy.

Usage: ``.venv/bin/python benchmarks/walk_forward_check.py [--seeds 20] [--ic 0.05] [--learner
--learner-seeds 5 --env-steps 16384 --candidates 2 --jobs 2 --algo ppo|direct]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from synthetic_market import generate, signal_tilt_returns, write_csv  # noqa: E402

from trainer.backtest.overfitting import probability_of_backtest_overfitting  # noqa: E402
from trainer.backtest.relative import vs_equal_weight  # noqa: E402
from trainer.data.folds import plan_folds  # noqa: E402
from trainer.selection import annual_sharpe, equal_weight_returns  # noqa: E402

START, END, FIRST_TEST_YEAR = "2010-01-04", "2016-12-30", 2013
STRENGTHS = (0.25, 0.5, 1.0)


def _span(dates: np.ndarray, span: tuple[str, str]) -> slice:
    lo = int(np.searchsorted(dates, np.datetime64(span[0], "D")))
    hi = int(np.searchsorted(dates, np.datetime64(span[1], "D"), side="right"))
    return slice(lo, hi)


def tilt_study(seed: int, ic: float) -> dict:
    """The tilt baseline's walk-forward on one market: stitched vs_equal_weight and PBO."""
    market = generate(seed, ic=ic, start=START, end=END)
    folds = plan_folds(market.dates, start=START, end=END, first_test_year=FIRST_TEST_YEAR)
    picked, ew, matrix = [], [], []
    for fold in folds:
        val, test = _span(market.dates, fold.validation), _span(market.dates, fold.test)
        scores = [annual_sharpe(signal_tilt_returns(market.close[val], strength=k)) or 0.0 for k in STRENGTHS]
        # the tilt's weights on a span's first day use the closes before it (the signal's lookback)
        tests = [signal_tilt_returns(market.close[test.start - 5 : test.stop], strength=k)[5:] for k in STRENGTHS]
        picked.append(tests[int(np.argmax(scores))])
        ew.append(equal_weight_returns(market.close[test]))
        matrix.append(np.column_stack(tests))
    a, b = np.concatenate(picked), np.concatenate(ew)
    rel = vs_equal_weight(a, b, periods_per_year=252, seed=seed)
    pbo = probability_of_backtest_overfitting(np.vstack(matrix), blocks=16).pbo
    return {"verdict": rel["verdict"], "ci95": rel["ci95"], "sharpe_difference": rel["sharpe_difference"], "pbo": pbo}


def learner_study(seed: int, ic: float, *, env_steps: int, candidates: int, work: Path, algo: str = "ppo") -> dict:
    """``python -m trainer walk-forward`` (``algo``, portfolio env) on the generated market."""
    path = write_csv(generate(seed, ic=ic, start=START, end=END), work / f"market-{ic}-{seed}.csv.gz")
    argv = [sys.executable, "-m", "trainer", "walk-forward", "--env", "portfolio", "--data", str(path)]
    argv += ["--start", START, "--end", END, "--first-test-year", str(FIRST_TEST_YEAR), "--json"]
    argv += ["--candidates", str(candidates), "--env-steps", str(env_steps), "--seed", str(seed), "--device", "cpu"]
    argv += ["--benchmark", str(work / "no-qqq.csv"), "--out", str(work / f"study-{ic}-{seed}")]
    argv += ["--algo", algo]
    if algo == "ppo":
        argv += ["--num-envs", "64", "--hp", "rollout_steps=32", "--hp", "hidden_sizes=[64, 64]"]  # small CPU PPO
    env = {**os.environ, "PADDOCK_TORCH_THREADS": "1", "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"verdict": "error", "error": proc.stderr.strip().splitlines()[-1:]}
    study = json.loads(proc.stdout)
    rel = study["out_of_sample"]["vs_equal_weight"]
    return {
        "verdict": rel["verdict"],
        "ci95": rel["ci95"],
        "sharpe_difference": rel["sharpe_difference"],
        "pbo": study["pbo"].get("pbo"),
    }


def table(name: str, rows: dict[float, list[dict]]) -> list[str]:
    out = [
        f"### {name}",
        "",
        "| market | seeds | beats | indistinguishable | trails | mean Sharpe diff. | mean CI low | mean PBO |",
    ]
    out.append("|---|---|---|---|---|---|---|---|")
    for ic, results in rows.items():
        ok = [r for r in results if r["verdict"] != "error"]
        count = {v: sum(r["verdict"] == v for r in ok) for v in ("beats", "indistinguishable", "trails")}
        pbos = [r["pbo"] for r in ok if r.get("pbo") is not None]
        label = "placebo (IC 0)" if ic == 0 else f"planted IC {ic:g}"
        out.append(
            f"| {label} | {len(results)} | {count['beats']} | {count['indistinguishable']} | {count['trails']} | "
            f"{np.mean([r['sharpe_difference'] for r in ok]):+.2f} | {np.mean([r['ci95'][0] for r in ok]):+.2f} | "
            f"{np.mean(pbos) if pbos else float('nan'):.2f} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--ic", type=float, default=0.05, help="planted information coefficient (default 0.05)")
    parser.add_argument("--learner", action="store_true", help="also run the learner's walk-forward")
    parser.add_argument("--algo", default="ppo", choices=("ppo", "direct"), help="learner: algorithm (default ppo)")
    parser.add_argument("--env-steps", type=int, default=16_384, help="learner: env steps per candidate and fold")
    parser.add_argument("--candidates", type=int, default=2, help="learner: agents per fold")
    parser.add_argument("--jobs", type=int, default=2, help="learner: studies at once")
    parser.add_argument("--learner-seeds", type=int, default=None, help="learner: seeds (default --seeds)")
    args = parser.parse_args()
    started = time.monotonic()
    tilt = {ic: [tilt_study(s, ic) for s in range(args.seeds)] for ic in (0.0, args.ic)}
    lines = table("Signal tilt (oracle-free baseline on the planted feature)", tilt)
    if args.learner:
        seeds = range(args.learner_seeds or args.seeds)
        with tempfile.TemporaryDirectory(prefix="paddock-wf-check-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
            jobs = {
                ic: [
                    pool.submit(
                        learner_study,
                        s,
                        ic,
                        env_steps=args.env_steps,
                        candidates=args.candidates,
                        work=Path(tmp),
                        algo=args.algo,
                    )
                    for s in seeds
                ]
                for ic in (0.0, args.ic)
            }
            learner = {ic: [f.result() for f in futures] for ic, futures in jobs.items()}
        lines += [
            "",
            *table(
                f"{args.algo} learner ({args.candidates} candidates x {args.env_steps:,} env steps per fold)", learner
            ),
        ]
        errors = [r for rs in learner.values() for r in rs if r["verdict"] == "error"]
        if errors:
            lines.append(f"\n{len(errors)} learner studies failed: {errors[0]['error']}")
    print("\n".join(lines))
    print(f"\n({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
