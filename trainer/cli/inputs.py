"""What the ``python -m trainer`` commands read from their arguments: the task (a file, or the
demo task, with the flags applied), data paths typed on the command line and the market data."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from trainer.algorithms import default_algorithm
from trainer.data.files import check_tickers
from trainer.envs.portfolio_config import RECOMMENDED_REBALANCE_BAND
from trainer.errors import ConfigError, DataError, error_summary
from trainer.limits import DEFAULT_LIMITS, InputLimits
from trainer.util.dates import parse_moment

__all__ = ["data_paths", "load_market", "read_task_file", "read_yaml", "task_from_args"]


class _TypedYaml(yaml.SafeLoader):
    """YAML as typed: booleans are ``true``/``false`` only (YAML 1.2, JSON) and dates stay text.
    YAML 1.1 also reads ``yes``, ``no``, ``on``, ``off`` as booleans and ``2020-01-01`` as a
    date, so ``--hp challenger_alpha=yes`` was refused as ``got True``, a value nobody typed."""


_TypedYaml.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_TypedYaml.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"
)


def read_yaml(text: str) -> Any:
    """``text`` read as YAML by :class:`_TypedYaml` (a task file, an ``--hp`` value).

    Raises:
        yaml.YAMLError: ``text`` is not YAML.
    """
    return yaml.load(text, Loader=_TypedYaml)  # a SafeLoader subclass: plain data only


#: The largest task file read (a task is a few hundred bytes of settings).
MAX_TASK_FILE_BYTES = 1 << 20


def read_task_file(path: str) -> dict[str, Any]:
    """The task mapping of a JSON (``.json``) or YAML file.

    Raises:
        ConfigError: (field ``task``) the file cannot be read, is over
            :data:`MAX_TASK_FILE_BYTES`, is not UTF-8 text, does not parse, nests too deeply
            for the parser, or holds something other than a mapping.
    """
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_TASK_FILE_BYTES:
            raise ConfigError(
                f"task file {p}: {size:,} bytes; a task file holds at most {MAX_TASK_FILE_BYTES:,}",
                field="task",
                file=str(p),
            )
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"task file {p}: cannot be read ({exc.strerror or exc})", field="task", file=str(p)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"task file {p}: not UTF-8 text (byte {exc.start}); give a JSON or YAML file", field="task", file=str(p)
        ) from None
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else read_yaml(text)
    except RecursionError:
        raise ConfigError(f"task file {p}: nested too deeply to read", field="task", file=str(p)) from None
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"task file {p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'} ({error_summary(exc)})",
            field="task",
            file=str(p),
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"task file {p}: must hold a mapping of task fields", field="task", file=str(p))
    return data


def data_paths(paths: Sequence[str], data_dir: str | None) -> list[str]:
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

    Without a task file it is the demo task of ``--env``'s kind (stock trading by default) with
    that kind's default algorithm (``direct`` for ``--env portfolio``, ``ppo`` otherwise;
    :func:`trainer.algorithms.default_algorithm`) unless ``--algo`` names one; a task file that
    names no algorithm gets its kind's default from ``TaskSpec.from_dict``.

    Raises:
        ConfigError: an unreadable task file; ``--tickers`` naming no ticker (``''``, ``','``) or
            one twice; a ``--train``/``--validation``/``--test`` bound that is not a day or
            moment (``test.end``).
    """
    from trainer.demo import demo_task_dict

    task = read_task_file(args.task) if args.task else demo_task_dict(args.env or "stock_trading")
    if not isinstance(task.get("data"), dict):
        task["data"] = {} if task.get("data") is None else task["data"]
    if args.data:
        task["data"] = {**task["data"], "paths": data_paths(args.data, args.data_dir)}
    if getattr(args, "membership", None):
        task["data"] = {**task["data"], "membership": data_paths([args.membership], args.data_dir)[0]}
    if args.tickers is not None:
        tickers = [t.strip() for t in args.tickers.split(",") if t.strip()]
        if not tickers:
            raise ConfigError(
                f"--tickers: {args.tickers!r} names no ticker; leave --tickers out to trade all of the data's tickers",
                field="tickers",
            )
        task["data"] = {**task["data"], "tickers": check_tickers(tickers)}
    typed = {}
    for split in ("train", "validation", "test"):
        value = getattr(args, split)
        if value:  # each bound read here, so an error names the flag's split (test.end), not data.end
            typed[split] = (parse_moment(value[0], f"{split}.start"), parse_moment(value[1], f"{split}.end"))
            task[split] = {"start": typed[split][0], "end": typed[split][1]}
    # Splits given on the command line set the data range (train start to test end, the day part
    # of a bar time), so tickers are judged over the dates asked for, not the task file's range.
    if isinstance(task["data"], dict):
        if "train" in typed:
            task["data"]["start"] = typed["train"][0][:10]
        if "test" in typed:
            task["data"]["end"] = typed["test"][1][:10]
    if args.env and args.env != task.get("kind", "stock_trading"):
        task["kind"] = args.env
        task["env"] = {}  # the other kind's settings do not apply
    env = dict(task.get("env") or {})
    if args.observation:
        env["observation"] = args.observation
    if args.reward:
        env["reward"] = args.reward  # a stock-trading task refuses it by name (env.reward)
    if args.env == "portfolio" and "rebalance_band" not in env:  # the product default (see the constant)
        env["rebalance_band"] = RECOMMENDED_REBALANCE_BAND
    # portfolio only; stock trading refuses them by name
    for name in ("rebalance_band", "turnover_penalty", "trade_rate", "band_mode", "execution_lag"):
        if getattr(args, name, None) is not None:
            env[name] = getattr(args, name)
    task["env"] = env
    if args.algo:
        if args.algo != (task.get("algorithm") or default_algorithm(task.get("kind") or "stock_trading")):
            task["hyperparameters"] = {}
        task["algorithm"] = args.algo
    hp = dict(task.get("hyperparameters") or {})
    if args.num_envs:
        hp["num_envs"] = args.num_envs
    for key, value in args.hp:
        hp[key] = value
    task["hyperparameters"] = hp
    return task


def limits_from_args(args: argparse.Namespace) -> InputLimits:
    """The ``--max-*`` flags as :class:`trainer.limits.InputLimits` (defaults for absent ones)."""
    d = DEFAULT_LIMITS
    return InputLimits(
        file_bytes=getattr(args, "max_file_bytes", d.file_bytes),
        file_rows=getattr(args, "max_file_rows", d.file_rows),
        bundle_bytes=getattr(args, "max_bundle_bytes", d.bundle_bytes),
        request_bytes=getattr(args, "max_body_bytes", d.request_bytes),
    )


def load_market(spec: Any, args: argparse.Namespace) -> Any:
    """``load_market_data`` with the CLI's folders; a missing file's error says where it looked
    and how to point elsewhere."""
    from trainer.data.pipeline import load_market_data

    try:
        return load_market_data(spec, data_dir=args.data_dir, cache_dir=args.cache_dir, limits=limits_from_args(args))
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
