"""One generation of a pod: (task, parent checkpoint?) -> trained agent, validation score, checkpoint.

In the tournament-based ensemble of ElegantRL-Podracer (Liu et al. 2021, arXiv 2112.05923,
section 3), each pod repeatedly trains an agent for one *generation* on many vectorized envs,
evaluates it and submits it to a leaderboard; the next generation starts from an agent picked
from the leaderboard (:mod:`trainer.tournament`), maybe with perturbed hyperparameters.
:func:`run_generation` is that unit of work; it knows nothing of the leaderboard or the web.

What is learned is a :class:`~trainer.task.TaskSpec` (:mod:`trainer.task`); the score comes
from :func:`~trainer.evaluation.evaluate_policy` on the validation split; the checkpoint is
written with :mod:`trainer.artifacts.checkpoints`. Those names are re-exported here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from trainer.agents import make_agent
from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint, utc_now
from trainer.artifacts.rebuild import build_agent
from trainer.data.market import MarketData
from trainer.data.pipeline import load_market_data
from trainer.data.splits import check_split_days
from trainer.data.timestamps import infer_periods_per_year
from trainer.envs.kinds import fit_stats, kind_of, make_env, observation_dim, prepare_market
from trainer.envs.observations import FeatureStats
from trainer.errors import BundleError, ConfigError, PolicyError
from trainer.evaluation import evaluate_policy
from trainer.task import SPLITS, TaskSpec, check_buffer_memory, reprefix, validate_hyperparameters
from trainer.util.device import buffer_memory_limit, configure_device, pick_device
from trainer.util.files import sha256_file
from trainer.util.jsonable import to_jsonable
from trainer.version import __version__

__all__ = ["GenerationResult", "branch_seed", "run_generation"]


@dataclass
class GenerationResult:
    """What one generation produced.

    Attributes:
        checkpoint_path: the checkpoint file written (see :mod:`trainer.artifacts.bundle`).
        sha256: hex SHA-256 of that file.
        score: validation Sharpe ratio of the full-window deterministic episode (0.0 when
            undefined, see :func:`evaluate_policy`); higher is better.
        metrics: the evaluation dict of :func:`evaluate_policy`, plus ``untrained``: the
            ``score``, ``sharpe_ratio`` and ``total_return`` of the line's untrained policy on
            the same validation days (evaluated before a fresh agent trains; a child carries
            its parent's) and the ``seed`` it was built with (the line's first generation's,
            so ``python -m trainer evaluate`` rebuilds the same policy on other windows).
        env_steps: env steps (transitions over all envs) trained in this generation.
        hyperparameters: the agent's full hyperparameters after any changes.
        cancelled: ``should_stop`` ended training early (the checkpoint is still written).
        duration_s: wall time of the whole generation, seconds.
        total_env_steps: env steps since the first generation of this lineage.
        generation: 1 for a fresh agent, the parent's + 1 otherwise.
        stats: the last training statistics returned by ``agent.learn``.
        telemetry: the training curve, at most ``TELEMETRY_MAX_POINTS`` points spread evenly
            over the generation's env steps, oldest first. Each point has ``env_steps`` and
            ``generation_env_steps`` (this generation so far), ``total_env_steps`` (the lineage
            so far, the x axis of a training curve), ``generation``, ``elapsed_s``,
            ``steps_per_s`` (since the previous point), ``episode_return_mean`` (training
            episodes, unscaled; None before any) and ``learning_rate``, plus PPO's
            ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``, ``clip_fraction``,
            ``explained_variance`` or SAC's ``critic_loss``, ``actor_loss``, ``alpha_loss``,
            ``alpha``; a value that is NaN or infinite is None.
    """

    checkpoint_path: Path
    sha256: str
    score: float
    metrics: dict[str, Any]
    env_steps: int
    hyperparameters: dict[str, Any]
    cancelled: bool
    duration_s: float
    total_env_steps: int = 0
    generation: int = 1
    stats: dict[str, Any] = field(default_factory=dict)
    telemetry: list[dict[str, Any]] = field(default_factory=list)


def _layout_key(layout: Mapping[str, Any]) -> tuple:
    return (layout.get("obs_dim"), tuple(layout.get("tickers", ())), tuple(layout.get("feature_names", ())))


def branch_seed(parent_agent_state: dict[str, Any], seed: int) -> int:
    """Seed of a child generation's random stream: a hash of the parent's RNG state and ``seed``.

    Two children of one parent with different seeds draw different rollouts and minibatches;
    the same parent and seed give the same child (reproducible tournaments).

    Args:
        parent_agent_state: the parent's ``agent.state_dict()`` (its ``"generator"`` entry is
            the torch generator state, a uint8 tensor).
        seed: this generation's seed.

    Returns:
        A non-negative 63-bit integer for ``torch.Generator.manual_seed``.
    """
    digest = hashlib.sha256()
    generator_state = parent_agent_state.get("generator")
    if isinstance(generator_state, torch.Tensor):
        digest.update(generator_state.cpu().numpy().tobytes())
    digest.update(int(seed).to_bytes(8, "little", signed=True))
    return int.from_bytes(digest.digest()[:8], "little") >> 1


def run_generation(
    task: TaskSpec | Mapping[str, Any],
    *,
    env_steps: int,
    out_path: str | Path,
    parent: str | Path | Mapping[str, Any] | None = None,
    hyperparameters: Mapping[str, Any] | None = None,
    seed: int = 0,
    device: str | torch.device = "auto",
    progress: Callable[[dict], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    market_data: MarketData | None = None,
    benchmark_returns: pd.Series | None = None,
    telemetry: Callable[[dict], None] | None = None,
) -> GenerationResult:
    """Train one generation on the train split, score it on validation, write a checkpoint.

    Steps: load the data (or use ``market_data``) and cut the splits; build a
    :class:`StockTradingVecEnv` over the train split with ``num_envs`` from the
    hyperparameters; build the agent (fresh, or the parent's full training state with the
    ``hyperparameters`` changes applied through ``agent.set_hyperparameters``); call
    ``agent.learn`` for ``env_steps``; evaluate with :func:`evaluate_policy` on the validation
    split; write the checkpoint atomically.

    Cancellation: ``should_stop`` is checked by the agent between updates. When it returns
    True, training stops after the current update, the agent is still evaluated and the
    checkpoint is still written (it holds the complete state after the last finished update,
    so no work is lost and a later generation can resume from it); the result has
    ``cancelled=True`` and the caller decides whether to submit it.

    The env is rebuilt each generation (its episodes restart, seeded by ``seed``); the agent's
    state (networks, optimizers, normalizer, RNG, counters) continues exactly from the parent.

    Args:
        task: the task (a :class:`TaskSpec` or a dict for :meth:`TaskSpec.from_dict`).
        env_steps: env-step budget of this generation (transitions summed over all envs, > 0).
        out_path: checkpoint file to write (``*.pt``); its folder is created.
        parent: checkpoint path or an already loaded checkpoint dict to continue from.
        hyperparameters: changes to the hyperparameters (PBT mutation), e.g.
            ``{"learning_rate": 1e-4}``; validated like the task's.
        seed: seed of the fresh agent and of the envs.
        device: ``"auto"`` (CUDA when available), ``"cpu"``, ``"cuda"``, ``"cuda:N"``
            (checked by :func:`trainer.util.device.pick_device`); a ``torch.device`` is used as
            given (the device-discipline test trains on a stand-in accelerator).
        progress: called at most about 4 times a second with the agent's progress dict
            (``env_steps``, ``steps_per_s``, ``episode_return_mean``, losses...) plus
            ``phase`` (``"train"``/``"evaluate"``/``"done"``), ``generation_env_steps``,
            ``env_steps_budget``, ``elapsed_s`` and ``eta_s``; the ``"done"`` call also has
            ``score``.
        should_stop: cancel signal, checked between updates.
        data_dir: folder that relative ``task.data.paths`` resolve against.
        cache_dir: Parquet cache folder of the processed data (``None``: no cache).
        market_data: an already loaded panel covering the splits (skips loading).
        benchmark_returns: daily QQQ returns covering the validation split, for the
            baseline-relative validation results (``metrics["vs_QQQ"]``); optional.
        telemetry: called with each training-curve point as the agent records it (at most
            ``TELEMETRY_MAX_POINTS`` per generation, see :attr:`GenerationResult.telemetry`),
            e.g. to store or stream it while the generation runs.

    Returns:
        :class:`GenerationResult`.

    Divergence: the agent checks its losses, gradient norms and parameters once per update
    and the evaluation checks every action; a NaN or infinity raises :class:`~trainer.errors.Diverged` and
    no checkpoint is written (the same hyperparameters would diverge again, so callers treat
    it as a permanent failure of this generation, not of the task).

    Raises:
        trainer.errors.Diverged: training or the trained policy produced NaN or infinite numbers; the message
            names the update, the quantity and the learning rate(s), e.g. ``"PPO diverged at
            update 37: policy loss is NaN; learning_rate=1000"``.
        ConfigError: an invalid task, budget, device or hyperparameter change; a split with
            fewer trading days than :data:`MIN_SPLIT_DAYS` or outside the data (field
            ``"<split>.start"``/``"<split>.end"``); a buffer over :data:`MAX_BUFFER_BYTES`.
        DataError: the data cannot be loaded.
        BundleError: the parent checkpoint is unreadable or does not fit the task (other
            algorithm, tickers or indicators).
    """
    started = time.monotonic()
    if not isinstance(task, TaskSpec):
        task = TaskSpec.from_dict(task)
    if isinstance(env_steps, bool) or not isinstance(env_steps, int | np.integer) or env_steps < 1:
        raise ConfigError(f"env_steps: must be a positive integer (got {env_steps!r})", field="env_steps")
    env_steps = int(env_steps)
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    configure_device(torch_device)

    market = (
        market_data if market_data is not None else load_market_data(task.data, data_dir=data_dir, cache_dir=cache_dir)
    )
    check_split_days({name: task.split(name) for name in SPLITS}, market.dates)
    raw_market = market
    market = prepare_market(market, task.env)  # scale-free features over the whole panel (causal)
    train_data = market.slice(*task.train, name="train")
    validation_data = market.slice(*task.validation, name="validation")
    # Z-score statistics of the train split only; a continued agent keeps its lineage's.
    feature_stats = fit_stats(train_data, task.env)

    parent_state: Mapping[str, Any] | None = None
    parent_file: str | None = None
    if parent is not None:
        if isinstance(parent, Mapping):
            parent_state = parent
        else:
            parent_file = str(parent)
            parent_state = load_checkpoint(parent)
        if parent_state.get("algorithm") != task.algorithm:
            raise BundleError(
                f"parent checkpoint was trained with {parent_state.get('algorithm')!r}, the task uses {task.algorithm!r}",
                file=parent_file,
            )
        base_hp = dict(parent_state["hyperparameters"])
    else:
        base_hp = dict(task.hyperparameters)
    changes = dict(hyperparameters or {})
    merged = validate_hyperparameters(task.algorithm, {**base_hp, **changes})

    if parent_state is not None and feature_stats is not None and parent_state.get("feature_stats"):
        feature_stats = FeatureStats.from_dict(parent_state["feature_stats"])
    obs_dim, action_dim = observation_dim(task.env, len(raw_market.tickers), len(raw_market.feature_names))
    check_buffer_memory(task.algorithm, merged, obs_dim, action_dim, limit=buffer_memory_limit(torch_device))
    env = make_env(
        train_data,
        task.env,
        num_envs=int(merged["num_envs"]),
        device=torch_device,
        seed=seed,
        feature_stats=feature_stats,
        state_info=False,  # the agents read final_observation and episode_return only
    )
    layout = env.observation_layout()
    if parent_state is not None and _layout_key(parent_state["observation_layout"]) != _layout_key(layout):
        old = parent_state["observation_layout"]
        raise BundleError(
            "parent checkpoint does not fit this task's data: it was trained on "
            f"{len(old.get('tickers', []))} tickers x {len(old.get('feature_names', []))} indicators "
            f"(obs_dim {old.get('obs_dim')}), the task has {len(layout['tickers'])} x "
            f"{len(layout['feature_names'])} (obs_dim {layout['obs_dim']})",
            file=parent_file,
        )

    if parent_state is not None:
        agent = build_agent(dict(parent_state), device=torch_device)
        # Branch the parent's random stream with this generation's seed: pods that continue the
        # same parent must explore differently, not replay the parent's stream bit for bit.
        # Networks, optimizer moments, normalizer and counters still continue exactly.
        agent.generator.manual_seed(branch_seed(parent_state["agent"], seed))
        real_changes = {k: v for k, v in merged.items() if base_hp.get(k) != v}
        if real_changes:
            try:
                agent.set_hyperparameters(**real_changes)
            except ConfigError as exc:
                raise reprefix(exc, "hyperparameters", inner=task.algorithm) from None
    else:
        agent = make_agent(task.algorithm, env.obs_dim, env.action_dim, merged, device=torch_device, seed=seed)

    parent_total = int(parent_state.get("total_env_steps", 0)) if parent_state is not None else 0
    generation = int(parent_state.get("generation", 0)) + 1 if parent_state is not None else 1

    def report(payload: dict[str, Any]) -> None:
        if progress is None:
            return
        elapsed = time.monotonic() - started
        done = int(payload.get("env_steps", 0))
        rate = payload.get("steps_per_s") or (done / elapsed if elapsed > 0 else 0.0)
        eta = (env_steps - done) / rate if rate and done < env_steps else 0.0
        progress(
            {
                **payload,
                "phase": payload.get("phase", "train"),
                "generation_env_steps": done,
                "env_steps_budget": env_steps,
                "total_env_steps": parent_total + done,
                "generation": generation,
                "elapsed_s": elapsed,
                "eta_s": max(0.0, float(eta)),
            }
        )

    def evaluate(name: str) -> dict[str, Any]:
        # Evaluation steps 1 + EVAL_RANDOM_WINDOWS envs day by day: on the CPU, where the env is
        # exact (float64) and a tiny step costs less than an accelerator's kernel launches and syncs.
        if torch_device.type == "cpu":

            def policy(obs: torch.Tensor) -> torch.Tensor:
                return agent.act(obs, deterministic=True)

        else:
            policy = agent.policy_module().to("cpu")
        return evaluate_policy(
            policy,
            validation_data,
            task.env,
            device="cpu",
            seed=seed,
            feature_stats=feature_stats,
            selection=task.selection,
            benchmark_returns=benchmark_returns,
            policy_name=name,
        )

    # The untrained policy of the line, scored on the same validation days: the baseline a
    # trained agent's score is read against (a child inherits its line's).
    if parent_state is None:
        before = evaluate(f"the untrained {task.algorithm} agent")
        untrained = {**{k: before.get(k) for k in ("score", "sharpe_ratio", "total_return")}, "seed": int(seed)}
    else:
        untrained = dict((parent_state.get("metrics") or {}).get("untrained") or {}) or None

    points: list[dict[str, Any]] = []

    def record(point: dict[str, Any]) -> None:
        point = {
            **point,
            "generation_env_steps": int(point["env_steps"]),
            "total_env_steps": parent_total + int(point["env_steps"]),
            "generation": generation,
        }
        points.append(point)
        if telemetry is not None:
            telemetry(point)

    stats = agent.learn(
        env,
        env_steps,
        progress=report if progress is not None else None,
        should_stop=should_stop,
        telemetry=record,
    )
    stats = to_jsonable(dict(stats or {}))
    cancelled = bool(stats.get("cancelled", False))
    trained = int(stats.get("env_steps", env_steps))
    if progress is not None:
        report({"phase": "evaluate", "env_steps": trained})

    try:
        metrics = evaluate(f"the {task.algorithm} agent")
    except PolicyError as exc:
        # finite losses and parameters, yet NaN actions: diverged all the same (no checkpoint)
        value = str(exc.details.get("value", "NaN"))
        error = agent.divergence(update=agent.updates, quantity="validation_action", value=value, stats=stats)
        error.details["date"] = exc.details.get("date")
        raise error from None
    if untrained is not None:
        metrics["untrained"] = untrained
    score = float(metrics["score"])
    hp_now = to_jsonable(dict(agent.hyperparameters()))

    state = {
        "created_at": utc_now(),
        "paddock_version": __version__,
        "algorithm": task.algorithm,
        "hyperparameters": hp_now,
        "agent": agent.state_dict(),
        "obs_dim": env.obs_dim,
        "action_dim": env.action_dim,
        "observation_layout": layout,
        "env_config": task.env.to_dict(),
        "kind": kind_of(task.env),
        "feature_stats": feature_stats.to_dict() if feature_stats is not None else None,
        "task": task.to_dict(),
        "data_window": {
            "tickers": list(market.tickers),
            "feature_names": list(raw_market.feature_names),
            "train": [str(train_data.dates[0]), str(train_data.dates[-1])],
            "validation": [str(validation_data.dates[0]), str(validation_data.dates[-1])],
            "test": list(task.test),
            "periods_per_year": infer_periods_per_year(train_data.dates),
            "content_sha256": raw_market.content_hash(),
            "source": market.source,
            "notes": list(market.notes),
        },
        "score": score,
        "metrics": metrics,
        "stats": stats,
        "env_steps": trained,
        "total_env_steps": parent_total + trained,
        "generation": generation,
        "parent_sha256": sha256_file(parent_file) if parent_file is not None else None,
        "seed": int(seed),
        "cancelled": cancelled,
    }
    out_path = Path(out_path)
    digest = save_checkpoint(state, out_path)
    duration = time.monotonic() - started
    if progress is not None:
        report({"phase": "done", "env_steps": trained, "score": score})
    return GenerationResult(
        checkpoint_path=out_path,
        sha256=digest,
        score=score,
        metrics=metrics,
        env_steps=trained,
        hyperparameters=hp_now,
        cancelled=cancelled,
        duration_s=duration,
        total_env_steps=parent_total + trained,
        generation=generation,
        stats=stats,
        telemetry=points,
    )
