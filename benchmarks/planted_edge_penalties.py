"""Why the default direct learner does not find a planted edge: its turnover penalty, measured.

Issue 25's target asks the default agent to beat 1/N by 0.25 Sharpe on a synthetic market with
a planted, price-observable edge of information coefficient 0.05 (:mod:`synthetic_market`: a
5-day short-term reversal the env observes as ``logret_5``), and to stay within 0.05 of 1/N on
a placebo market (IC 0). This script measures what stands between the default and that target.

**Protocol** (synthetic data only; no real-data span is read):

* markets: :func:`synthetic_market.generate` with 10 tickers (``--tickers``) and a 5-day
  reversal (``--lookback``), business days 2010-01-04 ..
  2015-12-31, one market per ``--seeds`` value and IC (``--ic`` and the placebo 0);
* one split: train 2010-01-04 .. 2013-12-20, validation 2014, test 2015 (5-day gaps);
* the ``direct`` learner (:mod:`trainer.agents.direct`) at its defaults, 2M env steps, band
  ``RECOMMENDED_REBALANCE_BAND``, on a **rung** of turnover penalties (``--rungs``, the first
  the default), at the env's default ``cost_pct`` (0.1 %) and, with ``--cost-free``, at
  ``cost_pct = 0`` too;
* beside it, the signal tilt of :func:`synthetic_market.signal_tilt_returns` (it knows the
  planted feature, not the IC) at strengths 0.25, 0.5 and 1, paying the same costs;
* each figure is the validation Sharpe difference against cost-free 1/N on the same days
  (:func:`trainer.backtest.relative.vs_equal_weight`), with the SE read off its 95 % interval
  (``(high - low) / 3.92``), and the mean daily turnover;
* the **one-SE pick** (Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*,
  2nd ed. 2009, sec. 7.10): the most penalised rung whose validation figure is within one SE of
  the best rung's; only that pick's test year is printed.

Usage: ``.venv/bin/python benchmarks/planted_edge_penalties.py [--seeds 0 1] [--ic 0.05] [--tickers 10] [--lookback 5]
[--rungs 0.02 0.005 0.001 0] [--cost-free] [--env-steps 2000000] [--last-year 2015]
[--validation-years 1] [--test-years 1] [--first-year 2010] [--trade-rate 1] [--tracking-penalty 20] [--hp NAME=VALUE ...] [--closed-gate hold] [--long-run]``. ``--last-year 2019 --validation-years 3`` trains on
2010-2015 and validates on 2016-2018, three times the default validation span.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from default_selection import gate_note  # noqa: E402
from synthetic_market import LOOKBACK, aim_tilt_returns, generate, signal_tilt_returns, write_csv  # noqa: E402

from trainer.artifacts.checkpoints import load_checkpoint  # noqa: E402
from trainer.backtest.relative import vs_equal_weight  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.data.spec import DataSpec  # noqa: E402
from trainer.envs.portfolio_config import RECOMMENDED_REBALANCE_BAND  # noqa: E402
from trainer.pod import run_generation  # noqa: E402
from trainer.selection import equal_weight_returns  # noqa: E402
from trainer.util.device import set_cpu_threads  # noqa: E402
from trainer.walk_forward import checkpoint_span_returns  # noqa: E402

START, END = "2010-01-04", "2015-12-31"


def plan_splits(
    last_year: int = 2015, validation_years: int = 1, test_years: int = 1, first_year: int = 2010
) -> dict[str, dict[str, str]]:
    """Train from the first business day of ``first_year`` to the year before validation
    (ending on 12-20, a 5-business-day gap), ``validation_years`` of validation, then
    ``test_years`` of test ending with ``last_year``; the test starts on the 6th business day of
    its first year (a 5-day gap)."""
    first_test = last_year - test_years + 1
    first_val = first_test - validation_years
    return {
        "train": {"start": START if first_year == 2010 else f"{first_year}-01-02", "end": f"{first_val - 1}-12-20"},
        "validation": {"start": f"{first_val}-01-02", "end": f"{first_test - 1}-12-31"},
        "test": {"start": f"{first_test}-01-09", "end": f"{last_year}-12-31"},
    }


SPLITS = plan_splits()
STRENGTHS = (0.25, 0.5, 1.0)
DEFAULT_COST = 1e-3  # the portfolio env's default cost_pct


@dataclass(frozen=True)
class Figure:
    """A validation Sharpe difference against cost-free 1/N, its SE and the mean daily turnover."""

    difference: float
    se: float
    turnover: float
    verdict: str = ""  # vs_equal_weight's: beats, trails or indistinguishable


def _figure(agent: np.ndarray, equal_weight: np.ndarray, turnover: float) -> Figure:
    rel = vs_equal_weight(agent, equal_weight, periods_per_year=252, seed=0)
    low, high = rel["ci95"]
    return Figure(float(rel["sharpe_difference"]), float((high - low) / 3.92), turnover, rel["verdict"])


def tilt_figures(
    close: np.ndarray,
    dates: np.ndarray,
    cost_pct: float,
    splits: dict[str, dict[str, str]] = SPLITS,
    lookback: int = LOOKBACK,
) -> dict[float, Figure]:
    """The signal tilt's validation figure per strength (it trades the whole span daily)."""
    lo = int(np.searchsorted(dates, np.datetime64(splits["validation"]["start"], "D")))
    hi = int(np.searchsorted(dates, np.datetime64(splits["validation"]["end"], "D"), side="right"))
    window = close[lo - lookback : hi]  # the signal reads the lookback's closes before the span
    ew = equal_weight_returns(close[lo:hi])
    out = {}
    for k in STRENGTHS:
        returns = signal_tilt_returns(window, strength=k, cost_pct=cost_pct, lookback=lookback)[lookback:]
        cost_free = signal_tilt_returns(window, strength=k, lookback=lookback)[lookback:]
        # turnover (one side) backed out of what the costs took: gross - net = cost * traded * gross
        turnover = float(np.mean((cost_free - returns) / (1 + cost_free)) / cost_pct / 2) if cost_pct else float("nan")
        out[k] = _figure(returns, ew, turnover)
    return out


def long_run_tilt(
    seed: int, ic: float, *, cost_pct: float = DEFAULT_COST, start: str = "1980-01-01", end: str = "2019-12-31"
) -> dict[tuple[float, float], tuple[float, float]]:
    """What the planted feature is worth net of costs, over a 40-year market (noise small).

    The tilt of :func:`synthetic_market.signal_tilt_returns` (target ``1/N + k * s / N``,
    clipped at 0, renormalised), traded by partial adjustment ``w <- w + eta * (target - w)``
    (the env's ``trade_rate``; Garleanu & Pedersen 2013, "Dynamic trading with predictable
    returns and transaction costs", trade partially towards the aim) and paying ``cost_pct`` of
    the value traded each day. Returns ``{(k, eta): (annualised Sharpe difference against
    cost-free 1/N, mean daily turnover)}`` (Sharpe ratios as ``mean / std * sqrt(252)``).
    """
    close = generate(seed, ic=ic, start=start, end=end).close
    growth = close[1:] / close[:-1]

    def sharpe(x: np.ndarray) -> float:
        return float(x.mean() / x.std() * np.sqrt(252))

    equal_weight = sharpe(growth.mean(axis=1) - 1.0)
    out = {}
    for k in STRENGTHS + (2.0,):
        for eta in (1.0, 0.5, 0.25):
            returns, traded = aim_tilt_returns(close, strength=k, trade_rate=eta, cost_pct=cost_pct)
            out[(k, eta)] = (sharpe(returns) - equal_weight, float(traded.mean()))
    return out


def aim_test_figure(
    close: np.ndarray, dates: np.ndarray, cost_pct: float, splits: dict[str, dict[str, str]], lookback: int = LOOKBACK
) -> Figure:
    """The ceiling on the test span: :func:`synthetic_market.aim_tilt_returns` at its defaults
    (tilt 2 traded half-way, the best of :func:`long_run_tilt`'s grid), traded from the first
    day of the market and read on the test days, against cost-free 1/N there."""
    returns, traded = aim_tilt_returns(close, cost_pct=cost_pct, lookback=lookback)
    days = dates[1:]  # returns[t] is earned from close t to close t+1
    lo = int(np.searchsorted(days, np.datetime64(splits["test"]["start"], "D")))
    hi = int(np.searchsorted(days, np.datetime64(splits["test"]["end"], "D"), side="right"))
    equal_weight = (close[1:] / close[:-1]).mean(axis=1)[lo:hi] - 1.0
    return _figure(returns[lo:hi], equal_weight, float(traded[lo:hi].mean()))  # both sides, as the env counts


def rung_figures(
    path: Path,
    market,
    rung: float,
    cost_pct: float,
    seed: int,
    steps: int,
    work: Path,
    splits: dict[str, dict[str, str]] = SPLITS,
    end: str = END,
    trade_rate: float = 1.0,
    tracking_penalty: float | None = None,
    extra: dict | None = None,
):
    """Train ``direct`` with ``turnover_penalty = rung`` (and ``tracking_penalty`` when given,
    else its default; ``extra``: further hyperparameters, e.g. ``kappa``); its validation
    figure and test figure."""
    extra = dict(extra or {})
    indicators = extra.pop("indicators", None)
    data = {"paths": [str(path)], "start": splits["train"]["start"], "end": end}
    task = {
        "data": data if indicators is None else {**data, "indicators": indicators},
        **splits,
        "kind": "portfolio",
        "env": {"rebalance_band": RECOMMENDED_REBALANCE_BAND, "cost_pct": cost_pct, "trade_rate": trade_rate},
        "algorithm": "direct",
        "hyperparameters": {
            "turnover_penalty": rung,
            **({} if tracking_penalty is None else {"tracking_penalty": tracking_penalty}),
            **(extra or {}),
        },
    }
    out = work / f"agent-{rung:g}-{cost_pct:g}-{seed}.pt"
    result = run_generation(task, env_steps=steps, out_path=out, seed=seed, device="cpu", market_data=market)
    checkpoint = load_checkpoint(out)
    spans = {name: checkpoint_span_returns(checkpoint, market, split=name) for name in ("validation", "test")}
    figures = {name: _figure(s.agent, s.equal_weight, float(s.turnover[1:].mean())) for name, s in spans.items()}
    return {**figures, "gate": result.stats.get("challenger")}


def one_se_pick(rungs: list[float], validation: dict[float, Figure]) -> float:
    """The most penalised rung within one SE of the best validation figure (rungs in order of
    decreasing penalty)."""
    best = max(rungs, key=lambda r: validation[r].difference)
    floor = validation[best].difference - validation[best].se
    return next(r for r in rungs if validation[r].difference >= floor)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--ic", type=float, default=0.05)
    parser.add_argument("--tickers", type=int, default=10, help="tickers of each synthetic market")
    parser.add_argument(
        "--lookback", type=int, default=LOOKBACK, help="days of the planted reversal signal (5: the env's logret_5)"
    )
    parser.add_argument("--rungs", type=float, nargs="+", default=[0.02, 0.005, 0.001, 0.0])
    parser.add_argument("--cost-free", action="store_true", help="also run every market at cost_pct 0")
    parser.add_argument("--env-steps", type=int, default=2_000_000)
    parser.add_argument("--last-year", type=int, default=2015, help="the test year; training starts in 2010")
    parser.add_argument("--validation-years", type=int, default=1)
    parser.add_argument("--test-years", type=int, default=1, help="test years ending with --last-year")
    parser.add_argument("--first-year", type=int, default=2010, help="the first training year")
    parser.add_argument("--trade-rate", type=float, default=1.0, help="the env's partial adjustment (1: trade fully)")
    parser.add_argument("--tracking-penalty", type=float, help="direct's tracking-error penalty (default: its own)")
    parser.add_argument(
        "--hp",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a further direct hyperparameter, VALUE read as YAML (e.g. kappa=1.5, hidden_sizes=[8])",
    )
    parser.add_argument(
        "--indicators",
        nargs="*",
        metavar="NAME",
        help="the data's stockstats indicators beside the scale-free returns and volatility "
        "(default FinRL's eight; none given: only the returns and volatility)",
    )
    parser.add_argument(
        "--closed-gate",
        choices=("train", "hold"),
        help="what a closed gate delivers (trainer.agents.direct_gate.CLOSED_GATE; default: its own)",
    )
    parser.add_argument(
        "--long-run", action="store_true", help="only print what the planted feature earns net of costs over 40 years"
    )
    args = parser.parse_args(argv)
    extra = {}
    for pair in args.hp:
        name, sep, raw = pair.partition("=")
        if not sep:
            parser.error(f"--hp {pair!r}: expected NAME=VALUE")
        extra[name.strip()] = yaml.safe_load(raw)
    if args.long_run:
        for seed in args.seeds:
            for (k, eta), (diff, turnover) in long_run_tilt(seed, args.ic).items():
                print(
                    f"IC {args.ic:g} seed {seed} tilt {k:g} trade rate {eta:g}: Sharpe difference vs cost-free 1/N "
                    f"{diff:+.3f}, turnover {100 * turnover:.1f} %/day (1980-2019, cost 0.1 %)"
                )
        return 0
    if args.closed_gate is not None:
        from trainer.agents import direct_gate

        direct_gate.CLOSED_GATE = args.closed_gate
    splits = plan_splits(args.last_year, args.validation_years, args.test_years, args.first_year)
    start = splits["train"]["start"]
    end = f"{args.last_year}-12-31"
    set_cpu_threads()
    rungs = sorted(args.rungs, reverse=True)
    costs = [DEFAULT_COST, 0.0] if args.cost_free else [DEFAULT_COST]
    started = time.monotonic()
    print("validation Sharpe difference vs cost-free 1/N (± SE), turnover %/day; test only for the one-SE pick")
    with tempfile.TemporaryDirectory(prefix="paddock-planted-") as tmp:
        work = Path(tmp)
        for ic in dict.fromkeys((args.ic, 0.0)):  # --ic 0: the placebos alone
            for seed in args.seeds:
                synthetic = generate(seed, ic=ic, start=start, end=end, tickers=args.tickers, lookback=args.lookback)
                path = write_csv(synthetic, work / f"market-{ic:g}-{seed}.csv.gz")
                chosen = {} if args.indicators is None else {"indicators": tuple(args.indicators)}
                market = load_market_data(DataSpec(paths=[str(path)], start=start, end=end, **chosen), data_dir=None)
                for cost in costs:
                    label = f"IC {ic:.2f} seed {seed} cost {100 * cost:.1f}%"
                    tilt = tilt_figures(synthetic.close, synthetic.dates, cost, splits, args.lookback)
                    figures = {
                        r: rung_figures(
                            path,
                            market,
                            r,
                            cost,
                            seed,
                            args.env_steps,
                            work,
                            splits,
                            end,
                            args.trade_rate,
                            args.tracking_penalty,
                            {**extra, **({} if args.indicators is None else {"indicators": list(args.indicators)})},
                        )
                        for r in rungs
                    }
                    validation = {r: f["validation"] for r, f in figures.items()}
                    pick = one_se_pick(rungs, validation)
                    cells = [
                        f"pen {r:g}: {v.difference:+.2f}±{v.se:.2f} ({100 * v.turnover:.1f}%{gate_note(figures[r]['gate'])})"
                        for r, v in validation.items()
                    ]
                    tilts = [f"tilt {k:g}: {t.difference:+.2f}" for k, t in tilt.items()]
                    test = figures[pick]["test"]
                    print(f"{label}: {' | '.join(cells)} || {' | '.join(tilts)}", flush=True)
                    aim = aim_test_figure(synthetic.close, synthetic.dates, cost, splits, args.lookback)
                    print(
                        f"    one-SE pick pen {pick:g}: test {test.difference:+.3f}±{test.se:.2f} {test.verdict}, "
                        f"turnover {100 * test.turnover:.1f}% || ceiling (aim tilt 2, trade rate 0.5): test "
                        f"{aim.difference:+.3f}±{aim.se:.2f} {aim.verdict}, turnover {100 * aim.turnover:.1f}%"
                    )
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
