"""The ``python -m trainer`` command line: ``train``, ``evaluate`` and ``export``.

``python -m trainer train --data-dir ../shared/data`` trains the built-in Dow-30 demo task
(train 2010-2019, validate 2020, test 2021-01-01..2022-11-15) with PPO's defaults, writes a
checkpoint per generation plus an agent bundle of the best one, and prints their paths and the
validation score. Exit statuses: 0 success; 1 training failed (it diverged: a loss, gradient
norm or parameter became NaN or infinite; one line ``error: PPO diverged at update 37: ...`` on
stderr, no bundle); 2 bad arguments or user errors (bad task, data, checkpoint or bundle, also
one whose policy emits NaN actions), one line ``error: ...``; 130 interrupted twice with
Ctrl-C. Never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import math
import os
import signal
import sys
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from trainer.errors import BundleError, ConfigError, DataError, Diverged, TrainerError
from trainer.version import __version__

EXIT_TRAINING_FAILED = 1
EXIT_USAGE = 2
DEFAULT_ENV_STEPS = 2_000_000
#: The shared data folder beside a checkout (``<repo>/../shared/data``), used when neither
#: ``--data-dir`` nor ``PADDOCK_DATA_DIR`` is given and it exists.
SHARED_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def default_data_dir() -> str | None:
    """``--data-dir`` when not given: ``$PADDOCK_DATA_DIR``, else :data:`SHARED_DATA_DIR` if it
    exists, else ``None`` (relative data paths then mean the current folder)."""
    env = os.environ.get("PADDOCK_DATA_DIR", "").strip()
    if env:
        return env
    return str(SHARED_DATA_DIR) if SHARED_DATA_DIR.is_dir() else None


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument as one ``error: ...`` line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(EXIT_USAGE)


def _positive_int(text: str) -> int:
    """A whole number >= 1; accepts ``1000000``, ``1_000_000`` and ``1e6``."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 1")
    return int(value)


def _hp_pair(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} must look like name=value, e.g. learning_rate=1e-4")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string; numbers are meant here
        with contextlib.suppress(ValueError):
            value = float(value)
    return key.strip(), value


DATA_DIR_HELP = (
    "folder that relative data paths resolve against (default: $PADDOCK_DATA_DIR, else "
    "../shared/data beside the checkout if it exists, else the current folder)"
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m trainer`` (exposed for docs and tests)."""
    parser = _Parser(
        prog="python -m trainer",
        description="Paddock trainer: train deep-RL stock-trading agents, evaluate and export them.",
    )
    parser.add_argument("--version", action="version", version=f"paddock {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    train = sub.add_parser(
        "train",
        help="train an agent on a task (file or flags; default: the Dow-30 demo task)",
        description=(
            "Train an agent for ENV_STEPS env steps on the task's train split, score it on the "
            "validation split, write checkpoints and an agent bundle. Flags override the task file; "
            "without a file the Dow-30 demo task is used (train 2010-2019, validation 2020, test "
            "2021-01-01..2022-11-15, PPO)."
        ),
    )
    train.add_argument("task", nargs="?", help="task file (YAML or JSON) as TaskSpec.to_dict() writes it")
    train.add_argument("--data", nargs="+", metavar="PATH", help="data file(s) or folder(s), replacing the task's")
    train.add_argument(
        "--data-dir",
        metavar="DIR",
        default=default_data_dir(),
        help=DATA_DIR_HELP,
    )
    train.add_argument("--cache-dir", metavar="DIR", help="Parquet cache of processed market data")
    train.add_argument("--tickers", metavar="A,B,...", help="comma-separated tickers to trade (default: all)")
    for split in ("train", "validation", "test"):
        train.add_argument(f"--{split}", nargs=2, metavar=("START", "END"), help=f"{split} dates, YYYY-MM-DD inclusive")
    train.add_argument("--algo", choices=None, metavar="NAME", help="algorithm: ppo, a2c, sac, td3 or ddpg")
    train.add_argument(
        "--env",
        choices=("stock_trading", "portfolio"),
        help="task kind: stock_trading (whole-share trades) or portfolio (target weights; zero action = equal weight)",
    )
    train.add_argument(
        "--observation",
        choices=("scale_free", "finrl"),
        help="observation layout (default scale_free; finrl: raw prices and indicators as in FinRL)",
    )
    train.add_argument(
        "--reward",
        choices=("log_return", "excess_log_return", "differential_sharpe"),
        help="reward of the portfolio env (default log_return)",
    )
    train.add_argument(
        "--env-steps",
        type=_positive_int,
        default=DEFAULT_ENV_STEPS,
        help=f"env steps in all (default {DEFAULT_ENV_STEPS:,})",
    )
    train.add_argument(
        "--generations",
        type=_positive_int,
        default=1,
        help="split the budget into N generations, each continuing the best",
    )
    train.add_argument("--num-envs", type=_positive_int, help="parallel envs (hyperparameter num_envs)")
    train.add_argument(
        "--hp", action="append", type=_hp_pair, default=[], metavar="NAME=VALUE", help="set a hyperparameter"
    )
    train.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    train.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    train.add_argument("--out", metavar="DIR", help="output folder (default ./paddock-runs/<UTC time>)")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--json", action="store_true", help="print the result as JSON")

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
    ev.add_argument("--start", metavar="YYYY-MM-DD", help="first day (overrides --split)")
    ev.add_argument("--end", metavar="YYYY-MM-DD", help="last day (overrides --split)")
    ev.add_argument("--data", nargs="+", metavar="PATH", help="data file(s), replacing the task's")
    ev.add_argument("--data-dir", metavar="DIR", default=default_data_dir(), help=DATA_DIR_HELP)
    ev.add_argument("--cache-dir", metavar="DIR", help="Parquet cache of processed market data")
    ev.add_argument("--device", default="cpu", help="cpu (default), auto, cuda or cuda:N")
    ev.add_argument("--json", action="store_true", help="print metrics as JSON")

    ex = sub.add_parser(
        "export",
        help="write an agent bundle (.zip) from a checkpoint",
        description="Write an agent bundle from a checkpoint.",
    )
    ex.add_argument("checkpoint", help="checkpoint file (.pt)")
    ex.add_argument("--out", metavar="ZIP", help="bundle path (default: the checkpoint's name with .zip)")

    sv = sub.add_parser(
        "serve",
        help="answer POST /act for an agent bundle over HTTP (no Django)",
        description=(
            "Serve the deterministic policy of an agent bundle: POST /act (or /api/agents/<id>/act) with "
            '{"observations": [[...]]}, {"date": "YYYY-MM-DD"} (needs the task\'s data files) or '
            '{"bars": {ticker: [...]}, "cash": ..., "holdings": {...}}; the same bodies and answers as '
            "the web app's endpoint (see trainer/serving.py). No authentication: it listens on localhost "
            "unless --host says otherwise."
        ),
    )
    sv.add_argument("bundle", help="agent bundle (.zip)")
    sv.add_argument("--port", type=_port, default=8500, help="TCP port (default 8500; 0 picks a free one)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sv.add_argument("--data-dir", metavar="DIR", default=default_data_dir(), help=DATA_DIR_HELP)
    sv.add_argument("--cache-dir", metavar="DIR", help="Parquet cache of processed market data")
    return parser


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not in 0..65535")
    return value


# ---------------------------------------------------------------------------- task building
def _read_task_file(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"task file {p}: cannot be read ({exc.strerror or exc})", field="task", file=str(p)) from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"task file {p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'} ({first})",
            field="task",
            file=str(p),
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"task file {p}: must hold a mapping of task fields", field="task", file=str(p))
    return data


def _data_paths(paths: Sequence[str], data_dir: str | None) -> list[str]:
    """Paths typed on the command line mean what they mean from the current folder."""
    out = []
    for p in paths:
        if data_dir and not Path(p).is_absolute() and (Path(data_dir) / p).exists():
            out.append(p)
        else:
            out.append(str(Path(p).resolve()))
    return out


def task_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The task dict of a ``train`` command: the file (or demo task) with the flags applied.

    Raises:
        ConfigError: an unreadable task file.
    """
    from trainer.task import demo_task_dict

    task = _read_task_file(args.task) if args.task else demo_task_dict()
    if not isinstance(task.get("data"), dict):
        task["data"] = {} if task.get("data") is None else task["data"]
    if args.data:
        task["data"] = {**task["data"], "paths": _data_paths(args.data, args.data_dir)}
    if args.tickers:
        task["data"] = {**task["data"], "tickers": [t for t in args.tickers.split(",") if t.strip()]}
    for split in ("train", "validation", "test"):
        value = getattr(args, split)
        if value:
            task[split] = {"start": value[0], "end": value[1]}
    # a data range narrower than the splits given on the command line would only get in the way
    if isinstance(task["data"], dict) and any(getattr(args, s) for s in ("train", "validation", "test")):
        starts = [str(task[s]["start"]) for s in ("train",) if isinstance(task.get(s), dict) and "start" in task[s]]
        ends = [str(task[s]["end"]) for s in ("test",) if isinstance(task.get(s), dict) and "end" in task[s]]
        if starts and task["data"].get("start") and starts[0] < str(task["data"]["start"]):
            task["data"]["start"] = starts[0]
        if ends and task["data"].get("end") and ends[0] > str(task["data"]["end"]):
            task["data"]["end"] = ends[0]
    if args.env and args.env != task.get("kind", "stock_trading"):
        task["kind"] = args.env
        task["env"] = {}  # the other kind's settings do not apply
    env = dict(task.get("env") or {})
    if args.observation:
        env["observation"] = args.observation
    if args.reward:
        env["reward"] = args.reward  # a stock-trading task refuses it by name (env.reward)
    task["env"] = env
    if args.algo:
        if args.algo != task.get("algorithm", "ppo"):
            task["hyperparameters"] = {}
        task["algorithm"] = args.algo
    hp = dict(task.get("hyperparameters") or {})
    if args.num_envs:
        hp["num_envs"] = args.num_envs
    for key, value in args.hp:
        hp[key] = value
    task["hyperparameters"] = hp
    return task


# ---------------------------------------------------------------------------- commands
def _load_market(spec: Any, args: argparse.Namespace) -> Any:
    """``load_market_data`` with the CLI's folders; a missing file's error says where it looked
    and how to point elsewhere."""
    from trainer.data.pipeline import load_market_data

    try:
        return load_market_data(spec, data_dir=args.data_dir, cache_dir=args.cache_dir)
    except DataError as exc:
        missing = exc.details.get("file")
        if not missing or Path(missing).exists():
            raise
        where = f"--data-dir {args.data_dir}" if args.data_dir else "the current folder (no --data-dir)"
        raise DataError(
            f"{exc.message}; relative data paths resolve against {where}: pass --data-dir DIR or set "
            "PADDOCK_DATA_DIR to the folder holding the data",
            **exc.details,
        ) from None


@contextlib.contextmanager
def _graceful_interrupt() -> Iterator[dict[str, bool]]:
    """First Ctrl-C asks training to stop after the current update (a checkpoint is still
    written); a second one interrupts at once."""
    flag = {"stop": False}
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        if flag["stop"]:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        flag["stop"] = True
        sys.stderr.write("\nstopping after the current update (Ctrl-C again to abort)\n")

    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def data_summary(market: Any) -> dict[str, Any]:
    """What the data pipeline decided, for the CLI's output: traded tickers, days and notes."""
    return {
        "tickers": list(market.tickers),
        "num_tickers": len(market.tickers),
        "start": str(market.dates[0]),
        "end": str(market.dates[-1]),
        "notes": list(market.notes),
    }


def format_data_summary(summary: dict[str, Any]) -> str:
    """``data:`` line (the number of tickers actually traded) and one ``note:`` line per decision."""
    lines = [
        f"data:       {summary['num_tickers']} tickers traded ({', '.join(summary['tickers'])}), "
        f"{summary['start']} to {summary['end']}"
    ]
    lines += [f"note:       {note}" for note in summary["notes"]]
    return "\n".join(lines)


def _fmt_score(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3f}"


def cmd_train(args: argparse.Namespace) -> int:
    """Run ``--generations`` generations of one pod; export the best one's bundle."""
    from tqdm import tqdm

    from trainer.bundle import export_bundle
    from trainer.data.splits import check_split_days
    from trainer.device import set_cpu_threads
    from trainer.pod import run_generation
    from trainer.task import SPLITS, TaskSpec, check_env_steps

    task = TaskSpec.from_dict(task_from_args(args))
    total = args.env_steps
    per_gen = [total // args.generations + (1 if i < total % args.generations else 0) for i in range(args.generations)]
    check_env_steps(task.algorithm, task.hyperparameters, min(per_gen), field="env_steps")
    out = Path(args.out) if args.out else Path("paddock-runs") / _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    set_cpu_threads()
    market = _load_market(task.data, args)
    check_split_days({name: task.split(name) for name in SPLITS}, market.dates)
    bar = tqdm(
        total=total,
        unit="step",
        unit_scale=True,
        dynamic_ncols=True,
        disable=True if args.no_progress else None,
        file=sys.stderr,
        desc="train",
    )
    best: Any = None
    done_before = 0
    results = []
    with _graceful_interrupt() as interrupt, bar:
        for gen, steps in enumerate(per_gen, start=1):
            if steps < 1:
                continue

            best_score = best.score if best is not None else None

            def on_progress(
                p: dict[str, Any], _base: int = done_before, _gen: int = gen, _best: float | None = best_score
            ) -> None:
                bar.n = min(total, _base + int(p.get("generation_env_steps", 0)))
                bar.set_postfix(
                    gen=_gen,
                    sps=f"{float(p.get('steps_per_s') or 0):,.0f}",
                    best=_fmt_score(_best if _best is not None else p.get("score")),
                    refresh=False,
                )
                bar.refresh()

            try:
                result = run_generation(
                    task,
                    env_steps=steps,
                    out_path=out / f"generation-{gen:03d}.pt",
                    parent=best.checkpoint_path if best is not None else None,
                    seed=args.seed + gen - 1,
                    device=args.device,
                    progress=on_progress,
                    should_stop=lambda: interrupt["stop"],
                    market_data=market,
                )
            except Diverged as exc:
                bar.close()
                return _training_failed(exc, args, generation=gen)
            results.append(result)
            done_before += result.env_steps
            if best is None or result.score > best.score:
                best = result
            bar.set_postfix(gen=gen, best=_fmt_score(best.score), refresh=True)
            if result.cancelled:
                break
    bundle_path = out / "agent.zip"
    bundle_sha = export_bundle(best.checkpoint_path, bundle_path)
    summary = {
        "status": "done",
        "checkpoint": str(best.checkpoint_path),
        "checkpoint_sha256": best.sha256,
        "bundle": str(bundle_path),
        "bundle_sha256": bundle_sha,
        "score": best.score,
        "validation_total_return": best.metrics.get("total_return"),
        "env_steps": sum(r.env_steps for r in results),
        "generations": len(results),
        "cancelled": any(r.cancelled for r in results),
        "duration_s": sum(r.duration_s for r in results),
        "data": data_summary(market),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_data_summary(summary["data"]))
        print(f"checkpoint: {summary['checkpoint']}  (sha256 {best.sha256})")
        print(f"bundle:     {summary['bundle']}  (sha256 {bundle_sha})")
        ret = summary["validation_total_return"]
        rule = (best.metrics.get("selection") or {}).get("description", "validation Sharpe ratio")
        print(f"score:      {best.score:.4f} ({rule})")
        vs_ew = (best.metrics.get("vs_equal_weight") or {}).get("excess_return")
        print(
            f"validation: total return {'n/a' if ret is None else f'{100 * ret:.2f} %'}, Sharpe ratio "
            f"{_fmt_score(best.metrics.get('sharpe_ratio'))}"
            + ("" if vs_ew is None else f", {100 * vs_ew:+.2f} % vs equal weight (1/N) on the same days")
        )
        print(
            f"trained:    {summary['env_steps']:,} env steps in {summary['generations']} generation(s), "
            f"{summary['duration_s']:.1f} s" + (" (stopped early)" if summary["cancelled"] else "")
        )
    return 0


def _training_failed(exc: Diverged, args: argparse.Namespace, *, generation: int) -> int:
    """Report a diverged generation: ``error: <the one line>`` on stderr (and, with ``--json``,
    ``{"status": "failed", "reason", "generation", "diverged", "stats"}`` on stdout); no bundle
    is written. Returns :data:`EXIT_TRAINING_FAILED`."""
    sys.stderr.write(f"error: {exc.message}\n")
    if args.json:
        details = {k: v for k, v in exc.details.items() if k != "stats"}
        report = {
            "status": "failed",
            "reason": exc.message,
            "generation": generation,
            "diverged": details,
            "stats": exc.details.get("stats"),
        }
        print(json.dumps(report, indent=2))
    return EXIT_TRAINING_FAILED


def _is_bundle(path: Path) -> bool:
    try:
        with zipfile.ZipFile(path) as zf:
            return "SHA256SUMS" in zf.namelist() or "config.json" in zf.namelist()
    except (zipfile.BadZipFile, OSError):
        return path.suffix.lower() == ".zip"


_TABLE = (
    ("start", "first return date", "date"),
    ("end", "last date", "date"),
    ("num_days", "daily returns", "int"),
    ("total_return", "total return", "pct"),
    ("annual_return", "annual return", "pct"),
    ("annual_volatility", "annual volatility", "pct"),
    ("sharpe_ratio", "Sharpe ratio", "num"),
    ("sortino_ratio", "Sortino ratio", "num"),
    ("calmar_ratio", "Calmar ratio", "num"),
    ("max_drawdown", "max drawdown", "pct"),
    ("max_drawdown_peak", "  peak", "date"),
    ("max_drawdown_trough", "  trough", "date"),
    ("win_rate", "daily win rate", "pct"),
    ("daily_mean_return", "mean daily return", "pct"),
    ("daily_sharpe_ratio", "daily Sharpe ratio", "num"),
    ("initial_value", "initial value (USD)", "usd"),
    ("final_value", "final value (USD)", "usd"),
)


def format_metrics(metrics: dict[str, Any]) -> str:
    """A two-column text table of the main metrics (rates in percent on screen); annualised
    figures of a window shorter than ``MIN_ANNUALISED_DAYS`` read "n/a (window shorter than 63
    days)" (``--json`` keeps their values, flagged ``short_window``)."""
    from trainer.backtest.metrics import ANNUALISED_KEYS, short_window_text

    short = bool(metrics.get("short_window"))
    rows = []
    for key, label, kind in _TABLE:
        value = metrics.get(key)
        if short and key in ANNUALISED_KEYS:
            text = short_window_text(int(metrics.get("min_annualised_days") or 63))
        elif value is None:
            text = "n/a"
        elif kind == "pct":
            text = f"{100 * value:.2f} %"
        elif kind == "num":
            text = f"{value:.3f}"
        elif kind == "usd":
            text = f"{value:,.2f}"
        else:
            text = str(value)
        rows.append((label, text))
    windows = metrics.get("random_windows") or {}
    if windows.get("count"):
        rows.append((f"{windows['count']} random {windows['days']}-day windows", ""))
        rows.append(("  mean total return", f"{100 * windows['total_return_mean']:.2f} %"))
        rows.append(
            ("  worst / best", f"{100 * windows['total_return_min']:.2f} % / {100 * windows['total_return_max']:.2f} %")
        )
    for key, name in (("vs_equal_weight", "equal weight (1/N)"), ("vs_QQQ", "QQQ")):
        rel = metrics.get(key)
        if rel:
            diff = rel.get("sharpe_difference")
            rows.append((f"vs {name}, same days", ""))
            rows.append(("  excess total return", f"{100 * rel['excess_return']:+.2f} %"))
            rows.append(("  Sharpe difference", "n/a" if diff is None else f"{diff:+.3f}"))
    if metrics.get("selection"):
        rows.append(("score", f"{_fmt_score(metrics.get('score'))} ({metrics['selection']['description']})"))
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{label.ljust(width)}  {text}" for label, text in rows)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Metrics of a checkpoint's or bundle's deterministic policy over a split or range."""
    import dataclasses

    from trainer.bundle import load_agent
    from trainer.checkpoints import load_checkpoint
    from trainer.data.pipeline import DataSpec
    from trainer.device import pick_device, set_cpu_threads
    from trainer.envs.kinds import prepare_market
    from trainer.envs.observations import FeatureStats
    from trainer.evaluation import evaluate_policy
    from trainer.rebuild import build_agent
    from trainer.task import TaskSpec

    set_cpu_threads()
    path = Path(args.path)
    device = pick_device(args.device)
    if _is_bundle(path):
        agent = load_agent(path, device=device)
        task_dict, tickers = agent.config["task"], list(agent.tickers)
        stats = agent.config.get("feature_stats")
        policy = agent.policy_fn(device)
    else:
        state = load_checkpoint(path)
        task_dict, tickers = state["task"], list(state["observation_layout"]["tickers"])
        stats = state.get("feature_stats")
        try:
            trained = build_agent(state, device=device)
        except BundleError as exc:
            raise BundleError(f"checkpoint {path}: {exc.message}", file=str(path)) from exc

        def policy(obs: Any) -> Any:
            return trained.act(obs, deterministic=True)

    task = TaskSpec.from_dict(task_dict)
    if args.start or args.end:
        start = args.start or task.test[0]
        end = args.end or task.test[1]
        name = "range"
    else:
        start, end = task.split(args.split)
        name = args.split
    data_fields = task.data.to_dict()
    data_fields["tickers"] = tickers  # the agent's universe, whatever the missing-data policy dropped
    if args.data:
        data_fields["paths"] = _data_paths(args.data, args.data_dir)
    if args.start or args.end:
        data_fields["end"] = None if args.end else data_fields["end"]
    spec = DataSpec.from_dict(data_fields, prefix="data")
    market = _load_market(spec, args)
    # scale-free features over the whole history first, so the range's lookbacks are complete
    window = prepare_market(market, task.env).slice(start, end, name=name)
    metrics = evaluate_policy(
        policy,
        window,
        dataclasses.replace(task.env),
        device=device,
        feature_stats=FeatureStats.from_dict(stats) if stats else None,
        selection=task.selection,
        policy_name=path.name,
    )
    if args.json:
        print(
            json.dumps(
                {
                    "path": str(path),
                    "split": name,
                    "start": start,
                    "end": end,
                    "metrics": metrics,
                    "data": data_summary(market),
                },
                indent=2,
            )
        )
    else:
        print(f"{path.name}: {name} {window.dates[0]} to {window.dates[-1]}, {len(tickers)} tickers")
        print(format_data_summary(data_summary(market)))
        print(format_metrics(metrics))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a bundle from a checkpoint and print its path and SHA-256."""
    from trainer.bundle import export_bundle

    out = Path(args.out) if args.out else Path(args.checkpoint).with_suffix(".zip")
    digest = export_bundle(args.checkpoint, out)
    print(f"bundle: {out}  (sha256 {digest})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a bundle over HTTP until interrupted; prints the address it listens on."""
    from trainer.serving import make_server

    try:
        server = make_server(
            args.bundle, host=args.host, port=args.port, data_dir=args.data_dir, cache_dir=args.cache_dir
        )
    except OSError as exc:
        raise ConfigError(
            f"port: cannot listen on {args.host}:{args.port} ({exc.strerror or exc})", field="port"
        ) from None
    host, port = server.server_address[:2]
    print(f"serving {args.bundle} on http://{host}:{port}/act (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m trainer``; returns the exit status (0 ok, 1 training diverged,
    2 user error, 130 interrupted)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    commands = {"train": cmd_train, "evaluate": cmd_evaluate, "export": cmd_export, "serve": cmd_serve}
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
