"""The ``python -m trainer`` commands (``train``, ``evaluate``, ``export``, ``serve``) and the exit
statuses they return; :mod:`trainer.cli.main` parses the arguments and calls them."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import signal
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trainer.cli.baselines import dsr_of_best, load_benchmark, untrained_metrics
from trainer.cli.inputs import data_paths, limits_from_args, load_market, task_from_args
from trainer.cli.output import (
    data_summary,
    fmt_score,
    format_data_summary,
    format_metrics,
    format_train_baselines,
    score_text,
    sharpe_text,
)
from trainer.errors import BundleError, ConfigError, Diverged

__all__ = ["EXIT_TRAINING_FAILED", "EXIT_USAGE", "cmd_evaluate", "cmd_export", "cmd_serve", "cmd_train"]

#: Exit status of a training that failed (it diverged).
EXIT_TRAINING_FAILED = 1
#: Exit status of bad arguments or a user error (task, data, checkpoint or bundle).
EXIT_USAGE = 2


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


def _writable_folder(out: Path) -> None:
    """Check, creating nothing, that ``out`` is or can become a folder this process writes into:
    it is a folder, or its nearest existing parent is one, and either is writable.

    Raises:
        ConfigError: (field ``out``) it or a parent is a file, or that folder is not writable.
    """
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder", field="out")
    existing = next((p for p in (out, *out.parents) if p.exists()), Path("."))
    if not existing.is_dir():
        raise ConfigError(f"--out {out}: {existing} is a file, not a folder", field="out")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: cannot write in {existing}", field="out")


def _check_generations(task: Any, total: int, generations: int) -> None:
    """Refuse ``--generations`` that leave a generation less than one rollout of ``total`` env
    steps (``--env-steps`` is split evenly between them), saying what to change.

    Raises:
        ConfigError: (field ``generations``) ``total // generations`` is below
            :func:`trainer.task.min_env_steps`.
    """
    from trainer.cli.arg_types import MAX_ENV_STEPS
    from trainer.task import OFF_POLICY, min_env_steps

    need = min_env_steps(task.algorithm, task.hyperparameters)
    each = total // generations
    if each >= need:
        return
    what = "vector step" if task.algorithm in OFF_POLICY else "rollout"
    fixes = [f"--generations {total // need:,} or fewer"]
    if generations * need <= MAX_ENV_STEPS:
        fixes.append(f"--env-steps {generations * need:,} or more")
    raise ConfigError(
        f"--generations: {total:,} env steps over {generations:,} generations are {each:,} per generation, "
        f"less than one {what} of {task.algorithm} ({need:,} env steps); give {' or '.join(fixes)}",
        field="generations",
    )


def cmd_train(args: argparse.Namespace) -> int:
    """Run ``--generations`` generations of one pod; export the best one's bundle; print its
    validation score next to equal weight, QQQ (:func:`trainer.cli.baselines.load_benchmark`),
    the line's untrained policy and its Deflated Sharpe Ratio."""
    from tqdm import tqdm

    from trainer.artifacts.bundle import export_bundle
    from trainer.data.pipeline import data_days
    from trainer.data.splits import check_split_days, check_splits_in_data
    from trainer.data.timestamps import has_time_of_day
    from trainer.pod import run_generation
    from trainer.task import SPLITS, TaskSpec, check_env_steps
    from trainer.util.device import set_cpu_threads

    task = TaskSpec.from_dict(task_from_args(args))
    total = args.env_steps
    check_env_steps(task.algorithm, task.hyperparameters, total, field="env_steps")
    _check_generations(task, total, args.generations)
    per_gen = [total // args.generations + (1 if i < total % args.generations else 0) for i in range(args.generations)]
    out = Path(args.out) if args.out else Path("paddock-runs") / _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    _writable_folder(out)  # before minutes of training, not after
    set_cpu_threads()
    market = load_market(task.data, args)
    ranges = {name: task.split(name) for name in SPLITS}
    # the web's rule, on the dataset's own days: ``market`` is cut to the splits' range, so its
    # first and last day are the range's (a train split from 1990 was cut to 2010 silently)
    days = data_days(task.data, tickers=market.tickers, data_dir=args.data_dir, limits=limits_from_args(args))
    files = ", ".join(sorted({Path(p).name for p in task.data.paths}))
    check_splits_in_data(ranges, days, file=files, intraday=has_time_of_day(market.dates))
    check_split_days(ranges, market.dates)  # and bar by bar on intraday data
    # QQQ on the validation days, next to equal weight (a note instead when the file lacks them)
    bench = load_benchmark(args, market.slice(*task.validation, name="validation").dates, data_paths=task.data.paths)
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
                    best=fmt_score(_best if _best is not None else p.get("score")),
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
                    benchmark_returns=bench.returns,
                )
            except Diverged as exc:
                bar.close()
                return _training_failed(exc, args, generation=gen)
            results.append(result)
            done_before += result.env_steps
            if best is None or result.score > best.score:
                best = result
            bar.set_postfix(gen=gen, best=fmt_score(best.score), refresh=True)
            if result.cancelled:
                break
    bundle_path = out / "agent.zip"
    bundle_sha = export_bundle(best.checkpoint_path, bundle_path)
    m = best.metrics
    dsr = dsr_of_best(m, [r.metrics for r in results])
    summary = {
        "status": "done",
        "checkpoint": str(best.checkpoint_path),
        "checkpoint_sha256": best.sha256,
        "bundle": str(bundle_path),
        "bundle_sha256": bundle_sha,
        "score": best.score,
        "score_note": m.get("score_note"),
        "selection": (m.get("selection") or {}).get("description"),
        "validation_total_return": m.get("total_return"),
        "validation_sharpe_ratio": m.get("sharpe_ratio"),
        "short_window": bool(m.get("short_window")),
        "vs_equal_weight": m.get("vs_equal_weight"),
        "vs_equal_weight_with_costs": m.get("vs_equal_weight_with_costs"),
        "vs_QQQ": m.get("vs_QQQ"),
        "benchmark": bench.to_dict(),
        "untrained": m.get("untrained"),
        "deflated_sharpe_ratio": dsr["value"],
        "deflated_sharpe_ratio_trials": dsr["trials"],
        "deflated_sharpe_ratio_note": dsr["note"],
        "env_steps": sum(r.env_steps for r in results),
        "generations": len(results),
        "cancelled": any(r.cancelled for r in results),
        "duration_s": sum(r.duration_s for r in results),
        "challenger": next((r.stats["challenger"] for r in results if r.stats.get("challenger")), None),
        "held_env_steps": sum(int(r.stats.get("held_env_steps", 0)) for r in results),
        "data": data_summary(market),
    }
    _print_train_summary(summary, m, dsr, bench_note=bench.note, as_json=args.json)
    return 0


def _print_train_summary(
    summary: dict[str, Any], m: dict[str, Any], dsr: dict[str, Any], *, bench_note: str | None, as_json: bool
) -> None:
    """Print :func:`cmd_train`'s result: the ``summary`` as JSON, or as lines of text from it,
    the best generation's validation metrics ``m`` and its Deflated Sharpe Ratio ``dsr``."""
    if as_json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_data_summary(summary["data"]))
        if bench_note:
            print(f"note:       {bench_note}")
        print(f"checkpoint: {summary['checkpoint']}  (sha256 {summary['checkpoint_sha256']})")
        print(f"bundle:     {summary['bundle']}  (sha256 {summary['bundle_sha256']})")
        ret = summary["validation_total_return"]
        print(f"score:      {score_text(m)}")
        print(
            f"validation: total return {'n/a' if ret is None else f'{100 * ret:.2f} %'}, Sharpe ratio "
            f"{sharpe_text(m.get('sharpe_ratio'), m)}"
        )
        for line in format_train_baselines(m, dsr):
            print(line)
        if summary["challenger"]:
            from trainer.agents.direct_gate import verdict_text

            print(f"gate:       {verdict_text(summary['challenger'])}")
        print(
            f"trained:    {summary['env_steps']:,} env steps in {summary['generations']} generation(s), "
            f"{summary['duration_s']:.1f} s"
            + (f", {summary['held_env_steps']:,} of them held at 1/N" if summary["held_env_steps"] else "")
            + (" (stopped early)" if summary["cancelled"] else "")
        )


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


def _evaluation_data(task: Any, tickers: list[str], args: argparse.Namespace) -> Any:
    """The data spec ``evaluate`` loads: the task's, on the agent's own tickers (whatever the
    missing-data policy dropped), with ``--data``, ``--membership`` and an explicit range's open
    end from the arguments."""
    from trainer.data.spec import DataSpec

    data_fields = task.data.to_dict()
    data_fields["tickers"] = tickers
    if args.data:
        data_fields["paths"] = data_paths(args.data, args.data_dir)
    if args.membership:
        data_fields["membership"] = data_paths([args.membership], args.data_dir)[0]
    if args.start is not None or args.end is not None:
        data_fields["end"] = None if args.end is not None else data_fields["end"]
    return DataSpec.from_dict(data_fields, prefix="data")


def _evaluation_range(task: Any, start: str | None, end: str | None, split: str) -> tuple[str, str, str]:
    """``(start, end, name)`` of the window ``evaluate`` scores: the typed ``--start`` and
    ``--end`` (``name`` ``"range"``), a bound left out taken from the split ``--split`` names
    (the test split by default), or that whole split when neither is typed.

    Raises:
        ConfigError: a range that ends before it starts, naming the bound typed and saying where
            the other came from (``"end: 2014-01-01 must be after start 2021-01-01 (the test
            split's start; pass --start to choose another)"``).
    """
    from trainer.data.splits import check_order

    first, last = task.split(split)
    if not (start or end):
        return first, last, split
    lo, hi = check_order(
        "",
        start or first,
        end or last,
        start_from=None if start else f"the {split} split's start; pass --start to choose another",
        end_from=None if end else f"the {split} split's end; pass --end to choose another",
    )
    return lo, hi, "range"


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Metrics of a checkpoint's or bundle's deterministic policy over a split or range, next to
    equal weight, QQQ and the untrained policy (a fresh agent of the same algorithm and sizes,
    built with the line's seed) on the same days."""
    import dataclasses

    from trainer.artifacts.bundle_reader import load_agent
    from trainer.artifacts.checkpoints import load_checkpoint
    from trainer.artifacts.rebuild import build_agent
    from trainer.backtest.relative import DEFAULT_REPS
    from trainer.data.splits import check_order, check_range_days, check_window
    from trainer.envs.kinds import prepare_market
    from trainer.envs.observations import FeatureStats
    from trainer.evaluation import evaluate_policy
    from trainer.task import TaskSpec
    from trainer.util.dates import parse_moment
    from trainer.util.device import pick_device, set_cpu_threads

    # the typed bounds first: a typo is answered before the bundle and the data load; a bound
    # typed empty (--start '') is an error too, not the --split split's bound
    typed_start = parse_moment(args.start, "start") if args.start is not None else None
    typed_end = parse_moment(args.end, "end") if args.end is not None else None
    if typed_start and typed_end:
        check_order("", typed_start, typed_end)
    set_cpu_threads()
    path = Path(args.path)
    device = pick_device(args.device)
    if _is_bundle(path):
        agent = load_agent(path, device=device, limits=limits_from_args(args))
        task_dict, tickers = agent.config["task"], list(agent.tickers)
        stats = agent.config.get("feature_stats")
        policy = agent.policy_fn(device)
        shape = {
            "algorithm": agent.algorithm,
            "obs_dim": agent.obs_dim,
            "action_dim": agent.action_dim,
            "hyperparameters": agent.config.get("hyperparameters") or {},
        }
        recorded = agent.config.get("validation_metrics") or {}
    else:
        state = load_checkpoint(path)
        task_dict, tickers = state["task"], list(state["observation_layout"]["tickers"])
        stats = state.get("feature_stats")
        shape = {k: state.get(k) for k in ("algorithm", "obs_dim", "action_dim", "hyperparameters")}
        recorded = {**(state.get("metrics") or {}), "seed": state.get("seed")}
        try:
            trained = build_agent(state, device=device)
        except BundleError as exc:
            raise BundleError(f"checkpoint {path}: {exc.message}", file=str(path)) from exc

        def policy(obs: Any) -> Any:
            return trained.act(obs, deterministic=True)

    task = TaskSpec.from_dict(task_dict)
    start, end, name = _evaluation_range(task, typed_start, typed_end, args.split)
    spec = _evaluation_data(task, tickers, args)
    market = load_market(spec, args)
    # the one rule of every door: a range may not end (or start) past the data, give or take
    # a weekend and a holiday; it is refused, never clipped silently
    check_window("" if name == "range" else name, start, end, first=market.dates[0], last=market.dates[-1])
    if name == "range":  # a split's days were checked when the task was made
        check_range_days(start, end, market.dates)
    # scale-free features over the whole history first, so the range's lookbacks are complete
    window = prepare_market(market, task.env).slice(start, end, name=name)
    bench = load_benchmark(args, window.dates, data_paths=spec.paths)

    def evaluate(act: Any, who: str, **extra: Any) -> dict[str, Any]:
        return evaluate_policy(
            act,
            window,
            dataclasses.replace(task.env),
            device=device,
            feature_stats=FeatureStats.from_dict(stats) if stats else None,
            selection=task.selection,
            benchmark_returns=bench.returns,
            policy_name=who,
            split=None if name == "range" else name,
            **extra,
        )

    metrics = evaluate(policy, path.name, bootstrap_reps=DEFAULT_REPS)
    if shape["algorithm"] == "ensemble":
        metrics["untrained_note"] = "n/a (an ensemble has no single untrained policy)"
    else:
        # the seed the line's untrained policy was built with (pods record it), else the file's
        seed = (recorded.get("untrained") or {}).get("seed", recorded.get("seed"))
        metrics["untrained"] = untrained_metrics(
            **shape,
            seed=int(seed or 0),
            evaluate=lambda act: evaluate(act, f"the untrained {shape['algorithm']} agent", random_windows=0),
        )
        if seed is None:
            metrics["untrained"]["seed_note"] = "the file records no seed; seed 0 used"
    if args.json:
        print(
            json.dumps(
                {
                    "path": str(path),
                    "split": name,
                    "start": start,
                    "end": end,
                    "metrics": metrics,
                    "benchmark": bench.to_dict(),
                    "data": data_summary(market),
                },
                indent=2,
            )
        )
    else:
        print(f"{path.name}: {name} {window.dates[0]} to {window.dates[-1]}, {len(tickers)} tickers")
        print(format_data_summary(data_summary(market)))
        if bench.note:
            print(f"note:       {bench.note}")
        print(format_metrics(metrics))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write a bundle from a checkpoint and print its path and SHA-256."""
    from trainer.artifacts.bundle import export_bundle

    out = Path(args.out) if args.out else Path(args.checkpoint).with_suffix(".zip")
    digest = export_bundle(args.checkpoint, out)
    print(f"bundle: {out}  (sha256 {digest})")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve a bundle over HTTP until interrupted; prints the address it listens on."""
    from trainer.serving.server import make_server

    try:
        server = make_server(
            args.bundle,
            host=args.host,
            port=args.port,
            data_dir=args.data_dir,
            cache_dir=args.cache_dir,
            limits=limits_from_args(args),
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
