"""Training: one generation (``trainer.pod.run_generation``) and the throughput measurement
of the demo."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainer.util.jsonable import to_jsonable
from webapp.engine.backtests import validation_benchmark_returns
from webapp.engine.market import _market_data


@dataclass(frozen=True)
class TrainedGeneration:
    """What :func:`train_generation` returns, in plain JSON-able types.

    Attributes:
        sha256: hex SHA-256 of the checkpoint file written.
        score: validation Sharpe ratio; ``None`` when the agent has none (NaN).
        metrics: the validation metrics (``trainer.evaluation.evaluate_policy``); for the direct
            learner with its gate on, also ``challenger_gate``, the gate's verdict
            (:func:`trainer.agents.direct_gate.run_gate`, or ``{"skipped": reason}``).
        env_steps: env steps trained (summed over the vectorized envs).
        hyperparameters: the agent's full hyperparameters after training.
        cancelled: ``should_stop`` ended training early.
        duration_s: wall time of the generation, seconds.
        generation: the depth in the lineage (1 = fresh).
        total_env_steps: the line's env steps, this generation's included.
        telemetry: the training curve (``GenerationResult.telemetry``, at most 50 points).
        tickers: the tickers the agent trades.
        provenance: what produced it (:func:`provenance`: code version, torch and numpy
            versions of the worker, data hash, seed).
    """

    sha256: str
    score: float | None
    metrics: dict[str, Any]
    env_steps: int
    hyperparameters: dict[str, Any]
    cancelled: bool
    duration_s: float
    generation: int = 1
    total_env_steps: int = 0
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    tickers: list[str] = field(default_factory=list)
    provenance: dict[str, Any] = field(default_factory=dict)


def train_generation(
    task: dict[str, Any],
    *,
    env_steps: int,
    out_path: str,
    parent_path: str | None,
    hyperparameters: dict[str, Any] | None,
    seed: int,
    device: str,
    progress: Callable[[dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    telemetry: Callable[[dict[str, Any]], None] | None = None,
    benchmark_path: str | Path | None = None,
) -> TrainedGeneration:
    """Train one generation with ``trainer.pod.run_generation``.

    Args:
        task: a normalized task spec (``validate_task``'s output).
        env_steps: env steps to train (summed over the vectorized envs).
        out_path: local file the checkpoint is written to (atomically).
        parent_path: local checkpoint to start from, ``None`` for a fresh agent.
        hyperparameters: values to train with (``None`` = the task's).
        seed: RNG seed of this generation.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        progress: called with ``{"env_steps", "steps_per_s", ...}`` a few times a second.
        should_stop: polled between updates; ``True`` cancels (result ``cancelled=True``).
        telemetry: called with each training-curve point (JSON-able) as the trainer records it.
        benchmark_path: the QQQ price file (``PADDOCK_BENCHMARK_FILE``); when readable, the
            validation metrics also hold the agent's excess return and Sharpe difference over
            QQQ on the same days (``metrics["vs_QQQ"]``).

    Returns:
        :class:`TrainedGeneration`.

    Raises:
        trainer.errors.TrainerError: bad data or config (a permanent failure).
        trainer.errors.Diverged: training produced NaN or infinite numbers (no checkpoint is
            written); ``message`` is the one line for users, ``details["stats"]["env_steps"]``
            the env steps trained. A permanent failure of this generation, not of the task.
    """
    from trainer.pod import run_generation
    from trainer.task import TaskSpec

    spec = TaskSpec.from_dict(task)
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    benchmark_returns = validation_benchmark_returns(
        spec.data.paths, market.dates, default=benchmark_path, data_dir=data_dir
    )
    result = run_generation(
        spec,
        env_steps=int(env_steps),
        out_path=out_path,
        parent=parent_path,
        hyperparameters=hyperparameters,
        seed=int(seed),
        device=device,
        progress=progress,
        should_stop=should_stop,
        data_dir=data_dir,
        cache_dir=cache_dir,
        market_data=market,
        benchmark_returns=benchmark_returns,
        telemetry=None if telemetry is None else (lambda point: telemetry(to_jsonable(point))),
    )
    score = None if result.score is None or not np.isfinite(result.score) else float(result.score)
    metrics = dict(result.metrics)
    if result.stats.get("challenger"):  # the direct learner's gate: kept, closed or skipped, and why
        metrics["challenger_gate"] = result.stats["challenger"]
    return TrainedGeneration(
        sha256=result.sha256,
        score=score,
        metrics=to_jsonable(metrics),
        env_steps=int(result.env_steps),
        hyperparameters=to_jsonable(result.hyperparameters),
        cancelled=bool(result.cancelled),
        duration_s=float(result.duration_s),
        generation=int(result.generation),
        total_env_steps=int(result.total_env_steps),
        telemetry=to_jsonable(result.telemetry),
        tickers=[str(t) for t in market.tickers],
        provenance=provenance(spec.data.paths, seed=int(seed)),
    )


def gate_text(metrics: dict[str, Any]) -> str | None:
    """The direct learner's challenger gate (``metrics["challenger_gate"]``, which
    :func:`train_generation` stores) as the CLI's one line, or ``None`` for an agent without one."""
    from trainer.agents.direct_gate import verdict_text

    verdict = (metrics or {}).get("challenger_gate")
    return verdict_text(verdict) if isinstance(verdict, dict) and verdict else None


def provenance(paths: list[str], *, seed: int | None) -> dict[str, Any]:
    """What produces a result (``trainer.provenance.provenance``): ``code_version`` (git commit
    or package version), ``packages`` (python, torch, numpy), ``data_sha256`` (``None`` when a
    file cannot be read here) and ``seed``."""
    from trainer.errors import TrainerError
    from trainer.provenance import code_version, data_digest, package_versions

    try:
        digest = data_digest(paths)
    except TrainerError:
        digest = None
    return {
        "code_version": code_version(),
        "packages": package_versions(),
        "data_sha256": digest,
        "seed": None if seed is None else int(seed),
    }


def measure_training_throughput(
    task: dict[str, Any],
    *,
    device: str = "auto",
    seconds: float = 4.0,
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Measure how many env steps per second the task's agent learns on this machine.

    One warm-up update (allocations, first kernels) is not timed; then the agent learns in
    whole rollouts until ``seconds`` have passed. The count includes the network updates, so
    it is the rate a generation trains at (evaluation and checkpointing come on top).

    Args:
        task: a normalized task spec (``validate_task``'s output) of any algorithm; its
            hyperparameters set the env count and network sizes. A chunk is one rollout
            (``num_envs x rollout_steps``) on-policy, one vector step (``num_envs``) off-policy.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        seconds: measuring time after the warm-up (> 0).
        data_dir, cache_dir: as for :func:`train_generation` (the processed data is cached,
            so a worker training the same task afterwards starts at once).

    Returns:
        ``{"steps_per_s": float, "env_steps": int, "seconds": float, "device": str}``.

    Raises:
        trainer.errors.TrainerError: bad data or config.
    """
    import time

    import torch

    from trainer.agents import make_agent
    from trainer.envs.kinds import make_env, prepare_market
    from trainer.task import TaskSpec
    from trainer.util.device import configure_device, pick_device

    spec = TaskSpec.from_dict(task)
    torch_device = pick_device(device)
    configure_device(torch_device)  # TF32 on CUDA, as the generations it sizes will train
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    train = prepare_market(market, spec.env).slice(*spec.train, name="train")
    hp = dict(spec.hyperparameters)
    env = make_env(train, spec.env, num_envs=int(hp["num_envs"]), device=torch_device, seed=0, state_info=False)
    agent = make_agent(spec.algorithm, env.obs_dim, env.action_dim, hp, device=torch_device, seed=0)
    chunk = int(hp["num_envs"]) * int(hp.get("rollout_steps", 1))
    # Off-policy agents act at random without updates for their first ``learning_starts``
    # steps: the warm-up runs past them, so that the timed steps include the updates.
    warmup = max(chunk, -(-int(hp.get("learning_starts", 0)) // chunk) * chunk + chunk)
    agent.learn(env, warmup)

    def sync() -> None:
        if torch_device.type == "cuda":
            torch.cuda.synchronize(torch_device)

    sync()
    begun = time.perf_counter()
    done = 0
    while True:
        stats = agent.learn(env, chunk)
        done += int(stats.get("env_steps", chunk))
        sync()
        elapsed = time.perf_counter() - begun
        if elapsed >= seconds:
            break
    return {"steps_per_s": done / elapsed, "env_steps": done, "seconds": elapsed, "device": str(torch_device)}


@dataclass(frozen=True)
class BuiltEnsemble:
    """What :func:`build_ensemble` returns: the checkpoint's ``sha256``, its validation
    ``score`` (``None`` when undefined) and ``metrics`` (JSON-able)."""

    sha256: str
    score: float | None
    metrics: dict[str, Any]


def build_ensemble(
    checkpoint_paths: Sequence[str | Path],
    out_path: str | Path,
    *,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    benchmark_path: str | Path | None = None,
    member_ids: Sequence[int] | None = None,
    total_env_steps: int | None = None,
) -> BuiltEnsemble:
    """Write the ensemble checkpoint of a run's agents (``trainer.artifacts.ensemble.build_ensemble``),
    scored on the task's validation split by the task's rule like any generation.

    ``member_ids`` (the agents' ids, in the order of ``checkpoint_paths``) and
    ``total_env_steps`` (the members' lines, each agent once) are stored in the checkpoint, so
    its bundle names the members and counts env steps as the API does.

    Returns:
        :class:`BuiltEnsemble`.

    Raises:
        trainer.errors.TrainerError: fewer than 2 agents, agents of different observations, or
            an unreadable checkpoint (naming the field ``agents``).
    """
    from trainer.artifacts.ensemble import build_ensemble as build
    from trainer.evaluation import evaluate_checkpoint_state
    from trainer.task import TaskSpec

    def evaluate(agent: Any, state: dict[str, Any]) -> dict[str, Any]:
        spec = TaskSpec.from_dict(state["task"])
        market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
        bench = validation_benchmark_returns(spec.data.paths, market.dates, default=benchmark_path, data_dir=data_dir)
        return evaluate_checkpoint_state(agent, state, market_data=market, benchmark_returns=bench)

    digest, state = build(
        [str(p) for p in checkpoint_paths],
        out_path,
        evaluate=evaluate,
        member_ids=member_ids,
        total_env_steps=total_env_steps,
    )
    score = state.get("score")
    return BuiltEnsemble(
        sha256=digest,
        score=None if score is None or not np.isfinite(score) else float(score),
        metrics=to_jsonable(state.get("metrics") or {}),
    )
