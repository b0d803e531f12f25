"""The ``python -m trainer`` command line: ``train``, ``evaluate``, ``export``, ``serve`` and ``walk-forward``.

``python -m trainer train --data-dir ../shared/data`` trains the built-in Dow-30 demo task
(train 2010-2019, validate 2020, test 2021-01-01..2022-11-15) with PPO's defaults, writes a
checkpoint per generation plus an agent bundle of the best one, and prints their paths and the
validation score. Exit statuses: 0 success; 1 training failed (it diverged: a loss, gradient
norm or parameter became NaN or infinite; one line ``error: PPO diverged at update 37: ...`` on
stderr, no bundle); 2 bad arguments or user errors (bad task, data, checkpoint or bundle, also
one whose policy emits NaN actions), one line ``error: ...``; 130 interrupted twice with
Ctrl-C. Never a traceback.

This module parses the arguments; the commands are in :mod:`trainer.cli.commands`, what they
read from their arguments in :mod:`trainer.cli.inputs` and what they print in
:mod:`trainer.cli.output`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from trainer.cli import arg_types
from trainer.cli.arg_types import MAX_ENV_STEPS
from trainer.cli.commands import EXIT_TRAINING_FAILED, EXIT_USAGE, cmd_evaluate, cmd_export, cmd_serve, cmd_train
from trainer.cli.walk_forward import WALK_FORWARD_DIRECT_ENV_STEPS, WALK_FORWARD_ENV_STEPS, cmd_walk_forward
from trainer.data.splits import MIN_RANGE_DAYS
from trainer.errors import Diverged, TrainerError
from trainer.limits import DEFAULT_LIMITS
from trainer.version import __version__

__all__ = ["DEFAULT_ENV_STEPS", "MAX_ENV_STEPS", "SHARED_DATA_DIR", "build_parser", "default_data_dir", "main"]

DEFAULT_ENV_STEPS = 2_000_000
#: The shared data folder beside a checkout (``<repo>/../shared/data``), used when neither
#: ``--data-dir`` nor ``PADDOCK_DATA_DIR`` is given and it exists.
SHARED_DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def default_data_dir() -> str | None:
    """``--data-dir`` when not given: ``$PADDOCK_DATA_DIR``, else :data:`SHARED_DATA_DIR` if it
    exists, else ``None`` (relative data paths then mean the current folder)."""
    env = os.environ.get("PADDOCK_DATA_DIR", "").strip()
    if env:
        return env
    return str(SHARED_DATA_DIR) if SHARED_DATA_DIR.is_dir() else None


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one ``error: ...`` line and exit status 2, and
    takes flags only as spelled (``--seed`` is not ``--se``: an abbreviation that later matches
    a new flag would change what an old command line means)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(EXIT_USAGE)


DATA_DIR_HELP = (
    "folder that relative data paths resolve against (default: $PADDOCK_DATA_DIR, else "
    "../shared/data beside the checkout if it exists, else the current folder)"
)

BENCHMARK_HELP = (
    "price file holding QQQ, the benchmark printed next to equal weight (default: $PADDOCK_BENCHMARK_FILE, "
    "else benchmark_etfs_daily_eodhd.csv.gz, in --data-dir); without it, or when it does not cover the "
    "window, a note says so and QQQ is left out"
)

MEMBERSHIP_HELP = (
    "point-in-time index membership, a CSV of ticker,from,to rows (to empty = still a member): each day "
    "trades only that day's members, and 1/N is over them (docs/walk-forward.md)"
)


def _add_limit_flags(parser: argparse.ArgumentParser, *, body: bool = False) -> None:
    """The caps on what an input may expand to (``trainer.limits.InputLimits``; defaults there)."""
    d = DEFAULT_LIMITS
    group = parser.add_argument_group("input limits (see docs/limits-trainer.md)")
    group.add_argument(
        "--max-file-bytes",
        type=arg_types.positive_int,
        default=d.file_bytes,
        metavar="BYTES",
        help=f"most bytes a data file may hold once decompressed (default {d.file_bytes:,})",
    )
    group.add_argument(
        "--max-file-rows",
        type=arg_types.positive_int,
        default=d.file_rows,
        metavar="ROWS",
        help=f"most data rows a file may hold (default {d.file_rows:,})",
    )
    group.add_argument(
        "--max-bundle-bytes",
        type=arg_types.positive_int,
        default=d.bundle_bytes,
        metavar="BYTES",
        help=f"most bytes an agent bundle's members may hold once decompressed (default {d.bundle_bytes:,})",
    )
    if body:
        group.add_argument(
            "--max-body-bytes",
            type=arg_types.positive_int,
            default=d.request_bytes,
            metavar="BYTES",
            help=f"largest request body; a longer Content-Length is answered 413 (default {d.request_bytes:,})",
        )


def add_task_flags(parser: argparse.ArgumentParser) -> None:
    """The task flags ``train`` and ``walk-forward`` share (the task file, data, env, algorithm,
    hyperparameters, device, seed, output); :func:`trainer.cli.inputs.task_from_args` reads them."""
    parser.add_argument("task", nargs="?", help="task file (YAML or JSON) as TaskSpec.to_dict() writes it")
    parser.add_argument("--data", nargs="+", metavar="PATH", help="data file(s) or folder(s), replacing the task's")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=default_data_dir(),
        help=DATA_DIR_HELP,
    )
    parser.add_argument("--cache-dir", metavar="DIR", help="Parquet cache of processed market data")
    parser.add_argument("--benchmark", metavar="FILE", help=BENCHMARK_HELP)
    parser.add_argument("--membership", metavar="FILE", help=MEMBERSHIP_HELP)
    parser.add_argument(
        "--tickers", metavar="A,B,...", help="comma-separated tickers to trade (default: all; an empty list is refused)"
    )
    parser.add_argument(
        "--algo",
        choices=None,
        metavar="NAME",
        help="algorithm: ppo, a2c, sac, td3, ddpg or direct (portfolio tasks); default: the task file's, else "
        "the default of --env: direct for portfolio (docs/default-selection.md), ppo for stock_trading",
    )
    parser.add_argument(
        "--env",
        choices=("stock_trading", "portfolio"),
        help="task kind: stock_trading (whole-share trades) or portfolio (target weights; zero action = equal weight)",
    )
    parser.add_argument(
        "--observation",
        choices=("scale_free", "scale_free_risk", "finrl"),
        help="observation layout (default scale_free; scale_free_risk, portfolio tasks: plus 63-day volatility, "
        "beta and correlation to the equal-weight market and 12-1 momentum; finrl: raw prices and indicators as in FinRL)",
    )
    parser.add_argument(
        "--reward",
        choices=("log_return", "excess_log_return", "differential_sharpe"),
        help="reward of the portfolio env (default log_return)",
    )
    parser.add_argument(
        "--rebalance-band",
        type=float,
        metavar="FRACTION",
        help="portfolio env no-trade band: a stock's weight moves only when it is more than this fraction "
        "of value from its target (--env portfolio starts with 0.01 unless the task file sets it; 0 trades "
        "every difference)",
    )
    parser.add_argument(
        "--turnover-penalty",
        type=float,
        metavar="COEF",
        help="portfolio env training-only reward penalty per unit of turnover (default 0)",
    )
    parser.add_argument(
        "--trade-rate",
        type=arg_types.trade_rate,
        metavar="ETA",
        help="portfolio env partial adjustment: each step moves the weights this fraction of the way to "
        "the (banded) target, in (0, 1] (default 1: all the way)",
    )
    parser.add_argument(
        "--band-mode",
        choices=("target", "edge"),
        help="portfolio env: a stock outside the no-trade band trades to its target (default) or only to "
        "the band's edge (Davis & Norman)",
    )
    parser.add_argument(
        "--execution-lag",
        type=int,
        choices=(0, 1),
        help="portfolio env: 1 trades the target chosen on day t's observation at day t+1's close "
        "(default 0: at day t's close)",
    )
    parser.add_argument("--num-envs", type=arg_types.positive_int, help="parallel envs (hyperparameter num_envs)")
    parser.add_argument(
        "--hp",
        action="append",
        type=arg_types.hp_pair,
        default=[],
        metavar="NAME=VALUE",
        help="set a hyperparameter (repeatable); VALUE is read as YAML: --hp learning_rate=1e-4 "
        "--hp hidden_sizes=[64,64] --hp subset_size=null",
    )
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    parser.add_argument(
        "--seed", type=arg_types.seed, default=0, help="random seed, 0 to 2,147,483,647 (default 0; the web's bound)"
    )
    parser.add_argument("--out", metavar="DIR", help="output folder (default ./paddock-runs/<UTC time>)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m trainer`` (exposed for docs and tests)."""
    parser = _Parser(
        prog="python -m trainer",
        description="Paddock trainer: train deep-RL stock-trading agents, evaluate and export them.",
    )
    parser.add_argument("--version", action="version", version=f"paddock {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    _add_train_command(sub)
    _add_walk_forward_command(sub)
    _add_evaluate_command(sub)
    _add_export_command(sub)
    _add_serve_command(sub)
    for command_parser in sub.choices.values():  # an unknown flag is reported by its own command
        command_parser.set_defaults(command_parser=command_parser)
    return parser


def _add_train_command(sub: Any) -> None:
    """``train``: the task flags, the three splits, the budget and its generations."""
    train = sub.add_parser(
        "train",
        help="train an agent on a task (file or flags; default: the Dow-30 demo task)",
        description=(
            "Train an agent for ENV_STEPS env steps on the task's train split, score it on the "
            "validation split, write checkpoints and an agent bundle. Flags override the task file; "
            "without a file the Dow-30 demo task is used (train 2010-2019, validation 2020, test "
            "2021-01-01..2022-11-15) of --env's kind, with PPO for stock trading and the direct learner "
            "for --env portfolio unless --algo names another."
        ),
    )
    add_task_flags(train)
    for split in ("train", "validation", "test"):
        train.add_argument(
            f"--{split}",
            nargs=2,
            metavar=("START", "END"),
            help=f"{split} range, inclusive: YYYY-MM-DD, or 'YYYY-MM-DD HH:MM' (exchange time, bar end) on intraday data",
        )
    train.add_argument(
        "--env-steps",
        type=arg_types.env_steps,
        default=DEFAULT_ENV_STEPS,
        help=f"env steps in all (default {DEFAULT_ENV_STEPS:,}; trained in whole rollouts, so rounded up to "
        "a multiple of num_envs x rollout_steps)",
    )
    train.add_argument(
        "--generations",
        type=arg_types.generations,
        default=1,
        help=f"split the budget into N generations, each continuing the best (at most {arg_types.MAX_GENERATIONS:,}; "
        "each gets at least one rollout of env steps)",
    )
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_limit_flags(train)


def _add_walk_forward_command(sub: Any) -> None:
    """``walk-forward``: the task flags and the folds of the study (docs/walk-forward.md)."""
    wf = sub.add_parser(
        "walk-forward",
        help="a walk-forward study: train, select and test fold by fold, stitch the test spans",
        description=(
            "Anchored walk-forward study (docs/walk-forward.md): fold k is tested on the calendar year(s) "
            "FIRST_TEST_YEAR + k x FOLD_YEARS, validated on the VALIDATION_DAYS trading days before it and "
            "trained on every day from START before that, with GAP_DAYS trading days dropped at each "
            "boundary. CANDIDATES agents (seeds) train per fold for ENV_STEPS env steps each; the best on "
            "validation is tested. Prints each fold, the stitched out-of-sample record against 1/N with its "
            "interval and verdict, and the Probability of Backtest Overfitting over every candidate."
        ),
    )
    add_task_flags(wf)
    wf.add_argument(
        "--start", required=True, metavar="YYYY-MM-DD", help="first day of the study (the first fold trains from it)"
    )
    wf.add_argument(
        "--end", required=True, metavar="YYYY-MM-DD", help="last day of the study (the last test span ends on it)"
    )
    wf.add_argument(
        "--first-test-year",
        required=True,
        type=arg_types.positive_int,
        metavar="YEAR",
        help="calendar year of the first test span",
    )
    wf.add_argument(
        "--fold-years",
        type=arg_types.positive_int,
        default=1,
        metavar="N",
        help="calendar years per test span (default 1)",
    )
    wf.add_argument(
        "--validation-days",
        type=arg_types.positive_int,
        default=252,
        metavar="N",
        help="trading days of each validation span (default 252)",
    )
    wf.add_argument(
        "--gap-days",
        type=arg_types.whole,
        default=5,
        metavar="N",
        help="purge/embargo trading days at each boundary (default 5)",
    )
    wf.add_argument(
        "--train-days",
        type=arg_types.positive_int,
        metavar="N",
        help="rolling windows: train on the last N trading days only (default: anchored)",
    )
    wf.add_argument(
        "--max-folds",
        type=arg_types.positive_int,
        metavar="N",
        help="stop after N folds (default: every year up to --end)",
    )
    wf.add_argument(
        "--candidates",
        type=arg_types.candidates,
        default=4,
        metavar="K",
        help=f"agents (seeds) trained per fold (default 4, at most {arg_types.MAX_CANDIDATES})",
    )
    wf.add_argument(
        "--env-steps",
        type=arg_types.env_steps,
        default=None,
        help=f"env steps of each candidate in each fold (default {WALK_FORWARD_ENV_STEPS:,}; "
        f"{WALK_FORWARD_DIRECT_ENV_STEPS:,} for direct)",
    )
    _add_limit_flags(wf)
    wf.set_defaults(train=None, validation=None, test=None)


def _add_evaluate_command(sub: Any) -> None:
    """``evaluate``: a checkpoint or bundle, the split or dates, the data and the benchmark."""
    ev = sub.add_parser(
        "evaluate",
        help="evaluate a checkpoint or bundle on a split or date range",
        description=(
            "Run the deterministic policy of a checkpoint (.pt) or agent bundle (.zip) over a split of its "
            "task (default: test) or a date range, from the first day with the initial cash, and print metrics."
        ),
    )
    ev.add_argument("path", help="checkpoint (.pt) or agent bundle (.zip)")
    ev.add_argument("--split", choices=("train", "validation", "test"), default="test", help="default test")
    ev.add_argument(
        "--start",
        metavar="YYYY-MM-DD",
        help="first day (with --end, overrides --split; alone, up to the end of the --split split)",
    )
    ev.add_argument(
        "--end",
        metavar="YYYY-MM-DD",
        help=(
            "last day (with --start, overrides --split; alone, from the start of the --split split); a range holds at least "
            f"{MIN_RANGE_DAYS} trading days"
        ),
    )
    ev.add_argument("--data", nargs="+", metavar="PATH", help="data file(s), replacing the task's")
    ev.add_argument("--data-dir", metavar="DIR", default=default_data_dir(), help=DATA_DIR_HELP)
    ev.add_argument("--cache-dir", metavar="DIR", help="Parquet cache of processed market data")
    ev.add_argument("--benchmark", metavar="FILE", help=BENCHMARK_HELP)
    ev.add_argument("--membership", metavar="FILE", help=MEMBERSHIP_HELP + " (default: the task's)")
    ev.add_argument("--device", default="cpu", help="cpu (default), auto, cuda or cuda:N")
    ev.add_argument("--json", action="store_true", help="print metrics as JSON")
    _add_limit_flags(ev)


def _add_export_command(sub: Any) -> None:
    """``export``: a checkpoint and the bundle path."""
    ex = sub.add_parser(
        "export",
        help="write an agent bundle (.zip) from a checkpoint",
        description="Write an agent bundle from a checkpoint.",
    )
    ex.add_argument("checkpoint", help="checkpoint file (.pt)")
    ex.add_argument("--out", metavar="ZIP", help="bundle path (default: the checkpoint's name with .zip)")


def _add_serve_command(sub: Any) -> None:
    """``serve``: a bundle, the address and the data of ``{"date"}`` requests."""
    sv = sub.add_parser(
        "serve",
        help="answer POST /act for an agent bundle over HTTP (no Django)",
        description=(
            "Serve the deterministic policy of an agent bundle: POST /act (or /api/agents/<id>/act) with "
            '{"observations": [[...]]}, {"date": "YYYY-MM-DD"} (needs the task\'s data files) or '
            '{"bars": {ticker: [...]}, "cash": ..., "holdings": {...}}; the same bodies and answers as '
            "the web app's endpoint (see trainer/serving/). No authentication: it listens on localhost "
            "unless --host says otherwise."
        ),
    )
    sv.add_argument("bundle", help="agent bundle (.zip)")
    sv.add_argument("--port", type=arg_types.port, default=8500, help="TCP port (default 8500; 0 picks a free one)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sv.add_argument("--data-dir", metavar="DIR", default=default_data_dir(), help=DATA_DIR_HELP)
    sv.add_argument("--cache-dir", metavar="DIR", help="Parquet cache of processed market data")
    _add_limit_flags(sv, body=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m trainer``; returns the exit status (0 ok, 1 training diverged,
    2 user error, 130 interrupted)."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "command_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    commands = {
        "train": cmd_train,
        "evaluate": cmd_evaluate,
        "export": cmd_export,
        "serve": cmd_serve,
        "walk-forward": cmd_walk_forward,
    }
    try:
        return commands[args.command](args)
    except Diverged as exc:  # cmd_train reports its own; a safety net for any other path
        sys.stderr.write(f"error: {exc.message}\n")
        return EXIT_TRAINING_FAILED
    except TrainerError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 130
