"""``python -m trainer walk-forward``: a walk-forward study from the command line.

Plans anchored yearly folds (:func:`trainer.data.folds.plan_folds`), trains ``--candidates``
agents per fold (:func:`trainer.pod.run_generation`), selects on validation, tests on the next
span and prints the stitched out-of-sample record with ``vs_equal_weight`` and PBO
(:func:`trainer.walk_forward.run_study`). ``--out`` receives every checkpoint and
``study.json`` (the ``--json`` output). Bad flags exit 2 with one line naming the flag.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path
from typing import Any

from trainer.algorithms import default_algorithm
from trainer.cli.baselines import load_benchmark
from trainer.cli.inputs import load_market, task_from_args
from trainer.cli.output import data_summary
from trainer.errors import ConfigError

__all__ = ["FLAGS", "WALK_FORWARD_DIRECT_ENV_STEPS", "WALK_FORWARD_ENV_STEPS", "cmd_walk_forward", "format_study"]

#: Env steps of each candidate in each fold when ``--env-steps`` is not given.
WALK_FORWARD_ENV_STEPS = 500_000
#: The same for the ``direct`` learner: the budget of the portfolio default chosen on validation
#: (docs/default-selection.md), ``train``'s default too.
WALK_FORWARD_DIRECT_ENV_STEPS = 2_000_000

#: Field names of the study's errors -> the flag that sets them.
FLAGS = {
    "start": "--start",
    "end": "--end",
    "first_test_year": "--first-test-year",
    "fold_years": "--fold-years",
    "validation_days": "--validation-days",
    "gap_days": "--gap-days",
    "train_days": "--train-days",
    "max_folds": "--max-folds",
    "env_steps": "--env-steps",
}


def _flagged(exc: ConfigError) -> ConfigError:
    """``exc`` with its field written as the flag the user typed (``--first-test-year: ...``)."""
    field = str(exc.details.get("field") or "")
    flag = FLAGS.get(field)
    if flag is None:
        return exc
    message = exc.message[len(field) :] if exc.message.startswith(field) else f": {exc.message}"
    return ConfigError(f"{flag}{message}", **{**exc.details, "flag": flag})


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{100 * x:+.2f} %"


def _num(x: Any) -> str:
    return "n/a" if x is None else f"{x:+.2f}"


def _verdict(rel: dict[str, Any]) -> str:
    if rel.get("verdict") is None:
        return rel.get("note") or "n/a"
    low, high = rel.get("ci95") or (None, None)
    return (
        f"{rel['verdict']} (Sharpe difference {_num(rel.get('sharpe_difference'))}, 95 % [{_num(low)}, {_num(high)}])"
    )


def format_study(study: dict[str, Any]) -> list[str]:
    """The text report: one line per fold, then the stitched record and PBO."""
    lines = []
    for fold in study["folds"]:
        m = fold["test_metrics"]
        lines.append(
            f"fold {fold['index']}: train {fold['train']['start']}..{fold['train']['end']}, validation "
            f"{fold['validation']['start']}..{fold['validation']['end']}, test {fold['test']['start']}.."
            f"{fold['test']['end']}; selected candidate {fold['selected']['candidate']} (seed "
            f"{fold['selected']['seed']}); test return {_pct(m.get('cumulative_return'))}, Sharpe "
            f"{_num(m.get('sharpe_ratio'))}; vs 1/N: {_verdict(fold['vs_equal_weight'])}"
        )
    oos = study["out_of_sample"]
    m, ew = oos["metrics"], oos["equal_weight_metrics"]
    lines.append(
        f"out of sample: {len(oos['dates'])} days {oos['dates'][0]}..{oos['dates'][-1]}, return "
        f"{_pct(m.get('cumulative_return'))} (1/N {_pct(ew.get('cumulative_return'))}), Sharpe "
        f"{_num(m.get('sharpe_ratio'))} (1/N {_num(ew.get('sharpe_ratio'))})"
    )
    lines.append(f"vs 1/N:        {_verdict(oos['vs_equal_weight'])}")
    pbo = study["pbo"]
    if pbo.get("pbo") is None:
        lines.append(f"PBO:           {pbo.get('note') or 'n/a'}")
    else:
        lines.append(
            f"PBO:           {pbo['pbo']:.2f} over {pbo['combinations']:,} splits of {pbo['candidates']} candidates"
        )
    return lines


def cmd_walk_forward(args: argparse.Namespace) -> int:
    """Run the study of the arguments and print it (text, or JSON with ``--json``)."""
    from trainer.data.folds import check_plan, plan_folds
    from trainer.data.spec import DataSpec
    from trainer.pod import run_generation
    from trainer.task import TaskSpec, check_env_steps, validate_hyperparameters
    from trainer.util.device import set_cpu_threads
    from trainer.util.files import atomic_write_bytes
    from trainer.walk_forward import fold_task, run_study

    task = task_from_args(args)
    plan = {
        "start": args.start,
        "end": args.end,
        "first_test_year": args.first_test_year,
        "fold_years": args.fold_years,
        "validation_days": args.validation_days,
        "gap_days": args.gap_days,
        "train_days": args.train_days,
        "max_folds": args.max_folds,
    }
    try:  # what needs no data first: a typo is answered before the data loads
        check_plan(**plan)
        algorithm = task.get("algorithm") or default_algorithm(task.get("kind") or "stock_trading")
        if args.env_steps is None:
            args.env_steps = WALK_FORWARD_DIRECT_ENV_STEPS if algorithm == "direct" else WALK_FORWARD_ENV_STEPS
        check_env_steps(
            algorithm, validate_hyperparameters(algorithm, task["hyperparameters"]), args.env_steps, field="env_steps"
        )
    except ConfigError as exc:
        raise _flagged(exc) from None
    task["data"] = {**task["data"], "start": args.start, "end": args.end}
    try:
        spec = DataSpec.from_dict(task["data"], prefix="data")
    except ConfigError as exc:
        field = str(exc.details.get("field", ""))
        if field in ("data.start", "data.end"):  # the study's --start/--end set the data range
            exc = ConfigError(exc.message.replace(field, field[5:], 1), **{**exc.details, "field": field[5:]})
        raise _flagged(exc) from None
    set_cpu_threads()
    market = load_market(spec, args)
    try:
        folds = plan_folds(market.dates, **plan)
        TaskSpec.from_dict(fold_task(task, folds[0]))
    except ConfigError as exc:
        raise _flagged(exc) from None
    out = (
        Path(args.out)
        if args.out
        else Path("paddock-runs") / _dt.datetime.now(_dt.UTC).strftime("walk-forward-%Y%m%dT%H%M%SZ")
    )
    bench = load_benchmark(args, market.dates, data_paths=spec.paths)

    def train(task_f: dict[str, Any], seed: int, path: Path) -> Any:
        return run_generation(
            task_f,
            env_steps=args.env_steps,
            out_path=path,
            seed=seed,
            device=args.device,
            market_data=market,
            benchmark_returns=bench.returns,
        )

    def on_fold(report: dict[str, Any]) -> None:
        if not args.json:
            sys.stderr.write(f"fold {report['index']} done (test {report['test']['start']}..{report['test']['end']})\n")

    study = run_study(
        task,
        folds,
        market,
        train=train,
        candidates=args.candidates,
        out=out,
        seed=args.seed,
        benchmark_returns=bench.returns,
        on_fold=on_fold,
    )
    summary = {
        "status": "done",
        "study": {
            "start": args.start,
            "end": args.end,
            "first_test_year": args.first_test_year,
            "fold_years": args.fold_years,
            "validation_days": args.validation_days,
            "gap_days": args.gap_days,
            "train_days": args.train_days,
            "candidates": args.candidates,
            "env_steps_per_candidate": args.env_steps,
            "seed": args.seed,
            "out": str(out),
        },
        **study,
        "benchmark": bench.to_dict(),
        "data": data_summary(market),
    }
    text = json.dumps(summary, indent=2)
    atomic_write_bytes(out / "study.json", text.encode("utf-8"))
    if args.json:
        print(text)
    else:
        if bench.note:
            print(f"note:          {bench.note}")
        for line in format_study(summary):
            print(line)
        print(f"written:       {out / 'study.json'}")
    return 0
