"""One generation of a pod: (task, parent checkpoint?) -> trained agent, validation score, checkpoint.

In the tournament-based ensemble of ElegantRL-Podracer (Liu et al. 2021, arXiv 2112.05923,
section 3), each pod repeatedly trains an agent for one *generation* on many vectorized envs,
evaluates it and submits it to a leaderboard; the next generation starts from an agent picked
from the leaderboard (:mod:`trainer.tournament`), maybe with perturbed hyperparameters.
:func:`run_generation` is that unit of work; it knows nothing of the leaderboard or the web.

What is learned is a :class:`~trainer.task.TaskSpec` (:mod:`trainer.task`); where a generation
starts is :mod:`trainer.lineage`; the score comes from :func:`~trainer.evaluation.evaluate_policy`
on the validation split; the checkpoint is written with :mod:`trainer.artifacts.checkpoints`.
:func:`run_generation` reads as its steps, each a function below it, in the order they run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from trainer.artifacts.checkpoints import save_checkpoint, utc_now
from trainer.data.market import MarketData
from trainer.data.pipeline import load_market_data
from trainer.data.splits import check_split_days
from trainer.data.timestamps import infer_periods_per_year
from trainer.envs.kinds import fit_stats, kind_of, make_env, observation_dim, prepare_market
from trainer.envs.observations import FeatureStats
from trainer.errors import ConfigError, PolicyError
from trainer.evaluation import evaluate_policy
from trainer.lineage import Lineage, check_parent_fits, load_lineage, resolve_hyperparameters, start_agent
from trainer.task import SPLITS, TaskSpec, check_buffer_memory
from trainer.util.device import buffer_memory_limit, configure_device, pick_device
from trainer.util.files import sha256_file
from trainer.util.jsonable import to_jsonable
from trainer.version import __version__

__all__ = ["GenerationResult", "run_generation"]


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

    Steps, in order: :func:`load_splits` (the data, or ``market_data``, cut into splits);
    :func:`~trainer.lineage.load_lineage` (the parent, or none) and
    :func:`~trainer.lineage.resolve_hyperparameters` (once: the parent's or the task's with
    ``hyperparameters`` applied); :func:`make_trainee` (the train env with ``num_envs`` envs, a
    fresh or continued agent); :func:`untrained_baseline`; :func:`train` (``agent.learn``);
    :func:`evaluate_trained` (the validation split); :func:`write_checkpoint` (atomically).

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
    task = task if isinstance(task, TaskSpec) else TaskSpec.from_dict(task)  # the one parse of the spec
    if isinstance(env_steps, bool) or not isinstance(env_steps, int | np.integer) or env_steps < 1:
        raise ConfigError(f"env_steps: must be a positive integer (got {env_steps!r})", field="env_steps")
    env_steps = int(env_steps)
    torch_device = device if isinstance(device, torch.device) else pick_device(device)
    configure_device(torch_device)

    data = load_splits(task, market_data=market_data, data_dir=data_dir, cache_dir=cache_dir)
    lineage = load_lineage(parent, task)
    values, changes = resolve_hyperparameters(task, lineage, hyperparameters)
    trainee = make_trainee(task, data, lineage, values, changes, seed=seed, device=torch_device)
    judge = Validation(task, data, trainee, seed=seed, benchmark_returns=benchmark_returns, device=torch_device)
    untrained = untrained_baseline(judge, lineage, seed=seed)
    reporter = ProgressReporter(progress, started=started, env_steps=env_steps, lineage=lineage)
    training = train(trainee, lineage, env_steps, reporter=reporter, should_stop=should_stop, telemetry=telemetry)
    metrics = evaluate_trained(judge, training, untrained)
    checkpoint = write_checkpoint(Path(out_path), task, data, lineage, trainee, training, metrics, seed=seed)
    reporter.report({"phase": "done", "env_steps": training.env_steps, "score": checkpoint.score})
    return GenerationResult(
        checkpoint_path=checkpoint.path,
        sha256=checkpoint.sha256,
        score=checkpoint.score,
        metrics=metrics,
        env_steps=training.env_steps,
        hyperparameters=checkpoint.hyperparameters,
        cancelled=training.cancelled,
        duration_s=checkpoint.written_at - started,
        total_env_steps=lineage.total_env_steps + training.env_steps,
        generation=lineage.generation,
        stats=training.stats,
        telemetry=training.points,
    )


@dataclass(frozen=True)
class GenerationData:
    """The market data of one generation, loaded once (:func:`load_splits`): ``raw`` as loaded
    (its indicator names and content hash go in the checkpoint); ``market``, ``raw`` with the
    env kind's scale-free features over the whole panel (causal,
    :func:`~trainer.envs.kinds.prepare_market`); ``train`` and ``validation``, ``market`` cut to
    the splits; ``feature_stats``, z-score statistics of the train split only (or ``None``)."""

    raw: MarketData
    market: MarketData
    train: MarketData
    validation: MarketData
    feature_stats: FeatureStats | None


def load_splits(
    task: TaskSpec, *, market_data: MarketData | None, data_dir: str | Path | None, cache_dir: str | Path | None
) -> GenerationData:
    """Load the task's data (or take ``market_data``), check every split has enough days, cut
    the train and validation splits. Raises ConfigError (a split too short or outside the data)
    and DataError (unreadable data)."""
    raw = (
        market_data if market_data is not None else load_market_data(task.data, data_dir=data_dir, cache_dir=cache_dir)
    )
    check_split_days({name: task.split(name) for name in SPLITS}, raw.dates)
    market = prepare_market(raw, task.env)
    train_data = market.slice(*task.train, name="train")
    validation_data = market.slice(*task.validation, name="validation")
    return GenerationData(raw, market, train_data, validation_data, fit_stats(train_data, task.env))


@dataclass
class Trainee:
    """The env over the train split and the agent that learns on it (:func:`make_trainee`).

    ``feature_stats`` are the observation statistics both use (the line's, for a continued
    agent); ``layout`` is :meth:`observation_layout` of the env, stored in the checkpoint."""

    env: Any
    agent: Any
    feature_stats: FeatureStats | None
    layout: dict[str, Any]


def make_trainee(
    task: TaskSpec,
    data: GenerationData,
    lineage: Lineage,
    values: Mapping[str, Any],
    changed: Mapping[str, Any],
    *,
    seed: int,
    device: torch.device,
) -> Trainee:
    """Build the train env and the parent's agent (its full training state, its random stream
    branched by ``seed``, ``changed`` applied) or a fresh one seeded by ``seed``.

    Raises:
        ConfigError: the buffers would exceed the device's memory limit, or a setting the
            agent refuses (field ``hyperparameters.<name>``, :func:`trainer.lineage.start_agent`).
        BundleError: the parent was trained on other tickers or indicators.
    """
    feature_stats = data.feature_stats
    if lineage.state is not None and feature_stats is not None and lineage.state.get("feature_stats"):
        feature_stats = FeatureStats.from_dict(lineage.state["feature_stats"])  # the line keeps its statistics
    obs_dim, action_dim = observation_dim(task.env, len(data.raw.tickers), len(data.raw.feature_names))
    check_buffer_memory(task.algorithm, values, obs_dim, action_dim, limit=buffer_memory_limit(device))
    env = make_env(
        data.train,
        task.env,
        num_envs=int(values["num_envs"]),
        device=device,
        seed=seed,
        feature_stats=feature_stats,
        state_info=False,  # the agents read final_observation and episode_return only
    )
    layout = env.observation_layout()
    check_parent_fits(lineage, layout)
    agent = start_agent(
        lineage, changed, env, algorithm=task.algorithm, hyperparameters=values, seed=seed, device=device
    )
    return Trainee(env, agent, feature_stats, layout)


@dataclass
class Validation:
    """Scores the trainee's deterministic policy on the validation split (:func:`evaluate_policy`)."""

    task: TaskSpec
    data: GenerationData
    trainee: Trainee
    seed: int
    benchmark_returns: pd.Series | None
    device: torch.device

    def evaluate(self, name: str) -> dict[str, Any]:
        """:func:`evaluate_policy`'s metrics of the agent as it is now (``name`` in its errors)."""
        agent = self.trainee.agent
        # Evaluation steps 1 + EVAL_RANDOM_WINDOWS envs day by day: on the CPU, where the env is
        # exact (float64) and a tiny step costs less than an accelerator's kernel launches and syncs.
        if self.device.type == "cpu":

            def policy(obs: torch.Tensor) -> torch.Tensor:
                return agent.act(obs, deterministic=True)

        else:
            policy = agent.policy_module().to("cpu")
        return evaluate_policy(
            policy,
            self.data.validation,
            self.task.env,
            device="cpu",
            seed=self.seed,
            feature_stats=self.trainee.feature_stats,
            selection=self.task.selection,
            benchmark_returns=self.benchmark_returns,
            policy_name=name,
        )


def untrained_baseline(judge: Validation, lineage: Lineage, *, seed: int) -> dict[str, Any] | None:
    """The line's untrained policy scored on the same validation days, the baseline a trained
    score is read against: evaluated now for a fresh agent (``score``, ``sharpe_ratio``,
    ``total_return``, ``seed``), the parent's for a child (``None`` when it has none)."""
    if lineage.state is None:
        before = judge.evaluate(f"the untrained {judge.task.algorithm} agent")
        return {**{k: before.get(k) for k in ("score", "sharpe_ratio", "total_return")}, "seed": int(seed)}
    return dict((lineage.state.get("metrics") or {}).get("untrained") or {}) or None


@dataclass
class ProgressReporter:
    """Turns the agent's progress dicts into :func:`run_generation`'s ``progress`` calls."""

    progress: Callable[[dict], None] | None
    started: float
    env_steps: int
    lineage: Lineage

    def report(self, payload: dict[str, Any]) -> None:
        if self.progress is None:
            return
        elapsed = time.monotonic() - self.started
        done = int(payload.get("env_steps", 0))
        rate = payload.get("steps_per_s") or (done / elapsed if elapsed > 0 else 0.0)
        eta = (self.env_steps - done) / rate if rate and done < self.env_steps else 0.0
        self.progress(
            {
                **payload,
                "phase": payload.get("phase", "train"),
                "generation_env_steps": done,
                "env_steps_budget": self.env_steps,
                "total_env_steps": self.lineage.total_env_steps + done,
                "generation": self.lineage.generation,
                "elapsed_s": elapsed,
                "eta_s": max(0.0, float(eta)),
            }
        )


@dataclass(frozen=True)
class Training:
    """What :func:`train` returns: ``stats`` (the last ``agent.learn`` statistics, JSON-able),
    ``env_steps`` trained, ``cancelled`` and the telemetry ``points``."""

    stats: dict[str, Any]
    env_steps: int
    cancelled: bool
    points: list[dict[str, Any]]


def train(
    trainee: Trainee,
    lineage: Lineage,
    env_steps: int,
    *,
    reporter: ProgressReporter,
    should_stop: Callable[[], bool] | None,
    telemetry: Callable[[dict], None] | None,
) -> Training:
    """``agent.learn`` for ``env_steps`` (until ``should_stop``), recording the training curve
    in lineage coordinates. Raises Diverged (NaN or infinite losses, gradients or parameters)."""
    points: list[dict[str, Any]] = []

    def record(point: dict[str, Any]) -> None:
        point = {
            **point,
            "generation_env_steps": int(point["env_steps"]),
            "total_env_steps": lineage.total_env_steps + int(point["env_steps"]),
            "generation": lineage.generation,
        }
        points.append(point)
        if telemetry is not None:
            telemetry(point)

    stats = trainee.agent.learn(
        trainee.env,
        env_steps,
        progress=reporter.report if reporter.progress is not None else None,
        should_stop=should_stop,
        telemetry=record,
    )
    stats = to_jsonable(dict(stats or {}))
    trained = int(stats.get("env_steps", env_steps))
    reporter.report({"phase": "evaluate", "env_steps": trained})
    return Training(stats, trained, bool(stats.get("cancelled", False)), points)


def evaluate_trained(judge: Validation, training: Training, untrained: dict[str, Any] | None) -> dict[str, Any]:
    """The trained policy's validation metrics, with the line's ``untrained`` baseline.

    Raises Diverged (no checkpoint is written) when the policy's actions are NaN although its
    losses and parameters were finite."""
    agent = judge.trainee.agent
    try:
        metrics = judge.evaluate(f"the {judge.task.algorithm} agent")
    except PolicyError as exc:
        value = str(exc.details.get("value", "NaN"))
        error = agent.divergence(update=agent.updates, quantity="validation_action", value=value, stats=training.stats)
        error.details["date"] = exc.details.get("date")
        raise error from None
    if untrained is not None:
        metrics["untrained"] = untrained
    return metrics


@dataclass(frozen=True)
class WrittenCheckpoint:
    """What :func:`write_checkpoint` wrote: ``path``, its ``sha256``, the ``score``, the agent's
    final ``hyperparameters`` and ``written_at`` (``time.monotonic()`` after the write)."""

    path: Path
    sha256: str
    score: float
    hyperparameters: dict[str, Any]
    written_at: float


def write_checkpoint(
    out_path: Path,
    task: TaskSpec,
    data: GenerationData,
    lineage: Lineage,
    trainee: Trainee,
    training: Training,
    metrics: dict[str, Any],
    *,
    seed: int,
) -> WrittenCheckpoint:
    """Write the agent's full training state and the generation's record atomically
    (:func:`~trainer.artifacts.checkpoints.save_checkpoint`; the format is in
    :mod:`trainer.artifacts.bundle`)."""
    score = float(metrics["score"])
    hp_now = to_jsonable(dict(trainee.agent.hyperparameters()))
    state = {
        "created_at": utc_now(),
        "paddock_version": __version__,
        "algorithm": task.algorithm,
        "hyperparameters": hp_now,
        "agent": trainee.agent.state_dict(),
        "obs_dim": trainee.env.obs_dim,
        "action_dim": trainee.env.action_dim,
        "observation_layout": trainee.layout,
        "env_config": task.env.to_dict(),
        "kind": kind_of(task.env),
        "feature_stats": trainee.feature_stats.to_dict() if trainee.feature_stats is not None else None,
        "task": task.to_dict(),
        "data_window": {
            "tickers": list(data.market.tickers),
            "feature_names": list(data.raw.feature_names),
            "train": [str(data.train.dates[0]), str(data.train.dates[-1])],
            "validation": [str(data.validation.dates[0]), str(data.validation.dates[-1])],
            "test": list(task.test),
            "periods_per_year": infer_periods_per_year(data.train.dates),
            "content_sha256": data.raw.content_hash(),
            "source": data.market.source,
            "notes": list(data.market.notes),
        },
        "score": score,
        "metrics": metrics,
        "stats": training.stats,
        "env_steps": training.env_steps,
        "total_env_steps": lineage.total_env_steps + training.env_steps,
        "generation": lineage.generation,
        "parent_sha256": sha256_file(lineage.file) if lineage.file is not None else None,
        "seed": int(seed),
        "cancelled": training.cancelled,
    }
    digest = save_checkpoint(state, out_path)
    return WrittenCheckpoint(out_path, digest, score, hp_now, time.monotonic())
