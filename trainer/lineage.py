"""Where a generation starts: its parent's checkpoint, or nothing (a fresh agent).

A child generation continues its parent's full training state (networks, optimizer moments,
normalizer, counters) with its random stream branched by the child's seed and the
hyperparameter changes of a PBT mutation applied (Jaderberg et al. 2017, arXiv 1711.09846,
"exploit and explore"); :func:`trainer.pod.run_generation` calls these steps.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer.agents import make_agent
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.errors import BundleError, ConfigError
from trainer.task import TaskSpec, reprefix, validate_hyperparameters

__all__ = [
    "Lineage",
    "branch_seed",
    "check_parent_fits",
    "continue_agent",
    "load_lineage",
    "resolve_hyperparameters",
    "start_agent",
]


@dataclass(frozen=True)
class Lineage:
    """Where a generation starts: the parent's checkpoint ``state`` (read from ``file``, or
    given loaded), or nothing (``state is None``: a fresh agent)."""

    state: Mapping[str, Any] | None = None
    file: str | None = None

    @property
    def total_env_steps(self) -> int:
        """Env steps of the line before this generation."""
        return int(self.state.get("total_env_steps", 0)) if self.state is not None else 0

    @property
    def generation(self) -> int:
        """This generation's depth: 1 for a fresh agent, the parent's + 1 otherwise."""
        return int(self.state.get("generation", 0)) + 1 if self.state is not None else 1


def load_lineage(parent: str | Path | Mapping[str, Any] | None, task: TaskSpec) -> Lineage:
    """Read the parent checkpoint (a path or a loaded dict; ``None``: fresh). Raises
    BundleError when it is unreadable or was trained with another algorithm."""
    if parent is None:
        return Lineage()
    lineage = Lineage(parent, None) if isinstance(parent, Mapping) else Lineage(load_checkpoint(parent), str(parent))
    if lineage.state.get("algorithm") != task.algorithm:
        raise BundleError(
            f"parent checkpoint was trained with {lineage.state.get('algorithm')!r}, the task uses {task.algorithm!r}",
            file=lineage.file,
        )
    return lineage


def resolve_hyperparameters(
    task: TaskSpec, lineage: Lineage, changes: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The generation's hyperparameters, resolved once: the parent's (or, fresh, the task's)
    with ``changes`` applied, validated. Returns ``(values, changed)``: the complete validated
    dict and the entries that differ from the parent's or the task's (what a continued agent
    is told through ``agent.set_hyperparameters``). Raises ConfigError naming the field."""
    base = dict(lineage.state["hyperparameters"]) if lineage.state is not None else dict(task.hyperparameters)
    values = validate_hyperparameters(task.algorithm, {**base, **dict(changes or {})})
    return values, {k: v for k, v in values.items() if base.get(k) != v}


def check_parent_fits(lineage: Lineage, layout: Mapping[str, Any]) -> None:
    """Raise BundleError unless the parent was trained on the observation ``layout`` of this
    generation's env (same obs_dim, tickers and indicators, in order); a fresh line passes."""
    if lineage.state is None:
        return
    old = lineage.state["observation_layout"]
    if _layout_key(old) != _layout_key(layout):
        raise BundleError(
            "parent checkpoint does not fit this task's data: it was trained on "
            f"{len(old.get('tickers', []))} tickers x {len(old.get('feature_names', []))} indicators "
            f"(obs_dim {old.get('obs_dim')}), the task has {len(layout['tickers'])} x "
            f"{len(layout['feature_names'])} (obs_dim {layout['obs_dim']})",
            file=lineage.file,
        )


def _layout_key(layout: Mapping[str, Any]) -> tuple:
    return (layout.get("obs_dim"), tuple(layout.get("tickers", ())), tuple(layout.get("feature_names", ())))


def continue_agent(
    lineage: Lineage, changed: Mapping[str, Any], *, algorithm: str, seed: int, device: torch.device
) -> Any:
    """The parent's agent with its full training state on ``device``, its random stream
    branched by ``seed`` (:func:`branch_seed`) and ``changed`` applied through
    ``agent.set_hyperparameters``. Raises ConfigError (field ``hyperparameters.<name>``) for a
    change the agent refuses, BundleError for a state it cannot rebuild."""
    agent = build_agent(dict(lineage.state), device=device)
    # Branch the parent's random stream with this generation's seed: pods that continue the
    # same parent must explore differently, not replay the parent's stream bit for bit.
    # Networks, optimizer moments, normalizer and counters still continue exactly.
    agent.generator.manual_seed(branch_seed(lineage.state["agent"], seed))
    if changed:
        try:
            agent.set_hyperparameters(**changed)
        except ConfigError as exc:
            raise reprefix(exc, "hyperparameters", inner=algorithm) from None
    return agent


def start_agent(
    lineage: Lineage,
    changed: Mapping[str, Any],
    env: Any,
    *,
    algorithm: str,
    hyperparameters: Mapping[str, Any],
    seed: int,
    device: torch.device,
) -> Any:
    """The generation's agent: the parent's continued (:func:`continue_agent`), or for a line
    that starts fresh a new one for ``env``'s ``obs_dim`` and ``action_dim``
    (:func:`trainer.agents.make_agent`, seeded by ``seed``).

    Raises:
        ConfigError: field ``hyperparameters.<name>``, as the task's own checks name it, for a
            setting the agent refuses, e.g. ``subset_size`` above the universe of a task that
            names no tickers (its size is known once the data is loaded).
        BundleError: a parent state the agent cannot rebuild.
    """
    if lineage.state is not None:
        return continue_agent(lineage, changed, algorithm=algorithm, seed=seed, device=device)
    try:
        return make_agent(algorithm, env.obs_dim, env.action_dim, dict(hyperparameters), device=device, seed=seed)
    except ConfigError as exc:
        raise reprefix(exc, "hyperparameters", inner=algorithm) from None


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
