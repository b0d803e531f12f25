"""Ensembles of leaderboard agents: the average action of the top-K policies, as one agent.

An ensemble checkpoint has the same keys as a generation's checkpoint (so bundles, backtests,
evaluation and the web treat it like any agent) with ``algorithm = "ensemble"`` and
``agent = {"members": [...]}``: each member's algorithm, hyperparameters and full agent state.
Its policy (:class:`EnsemblePolicy`) maps a raw observation to the mean of the members'
deterministic actions. For the portfolio env the action is the logit vector of the target
weights, so the average action is a normalised geometric mean of the members' target weights;
for the stock-trading env it is the average trade. All members must read the same observation
(same kind, tickers, indicators, layout and train-split statistics): they come from one run.

Averaging the decisions of several selected agents is the ensemble step of ElegantRL-Podracer
(Liu et al. 2021, arXiv 2112.05923) and of FinRL's ensemble strategy (Yang et al. 2020, "Deep
Reinforcement Learning for Automated Stock Trading: An Ensemble Strategy"); it reduces the
variance that selection on one validation path leaves in a single agent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint, utc_now
from trainer.errors import BundleError, ConfigError
from trainer.util.files import sha256_file
from trainer.version import __version__

__all__ = ["ENSEMBLE", "EnsembleAgent", "EnsemblePolicy", "build_ensemble", "ensemble_policy_from_config"]

ENSEMBLE = "ensemble"
MAX_MEMBERS = 16


class EnsemblePolicy(nn.Module):
    """Raw obs (B, obs_dim) float32 -> mean of the members' actions (B, action_dim) in [-1, 1].

    Args:
        members: the members' deterministic policy modules (normalizers included).
    """

    def __init__(self, members: Sequence[nn.Module]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.stack([m(obs) for m in self.members]).mean(dim=0)


class EnsembleAgent:
    """The inference side of the agent API for an ensemble checkpoint (no training)."""

    algorithm = ENSEMBLE

    def __init__(self, members: Sequence[Any]) -> None:
        self.members = list(members)

    def policy_module(self) -> nn.Module:
        """A fresh :class:`EnsemblePolicy` of the members' ``policy_module()``s, in eval mode."""
        return EnsemblePolicy([m.policy_module() for m in self.members]).eval()

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = True) -> torch.Tensor:
        """Mean deterministic action of the members (``deterministic`` is always true)."""
        return torch.stack([m.act(obs, deterministic=True) for m in self.members]).mean(dim=0)

    def hyperparameters(self) -> dict[str, Any]:
        return {"members": len(self.members)}


def build_members(
    state: dict[str, Any], make: Callable[..., Any], *, device: str | torch.device = "cpu"
) -> EnsembleAgent:
    """Rebuild every member agent of an ensemble checkpoint state with ``make`` (``make_agent``)."""
    members = []
    for i, member in enumerate(state["agent"]["members"]):
        agent = make(
            member["algorithm"],
            int(state["obs_dim"]),
            int(state["action_dim"]),
            dict(member["hyperparameters"]),
            device=device,
            seed=0,
        )
        try:
            agent.load_state_dict(member["agent"])
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise BundleError(f"ensemble member {i} does not rebuild: {exc}", member=str(i)) from exc
        members.append(agent)
    return EnsembleAgent(members)


def ensemble_policy_from_config(config: dict[str, Any], make: Callable[..., Any]) -> EnsemblePolicy:
    """An untrained :class:`EnsemblePolicy` shaped like a bundle's ``config.json`` says (for
    loading ``policy.safetensors`` into it)."""
    arch = config["architecture"]
    members = [
        make(
            m["algorithm"],
            int(arch["obs_dim"]),
            int(arch["action_dim"]),
            dict(m["hyperparameters"]),
            device="cpu",
            seed=0,
        ).policy_module()
        for m in config["ensemble"]["members"]
    ]
    return EnsemblePolicy(members)


def _same(
    states: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], Any], what: str, paths: Sequence[str]
) -> None:
    first = key(states[0])
    for state, path in zip(states[1:], paths[1:]):
        if key(state) != first:
            raise ConfigError(
                f"agents: {path} has other {what} than {paths[0]}; an ensemble needs one observation", field="agents"
            )


def build_ensemble(
    checkpoints: Sequence[str | Path],
    out_path: str | Path,
    *,
    evaluate: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None,
    member_ids: Sequence[int] | None = None,
    total_env_steps: int | None = None,
) -> tuple[str, dict[str, Any]]:
    """Write the checkpoint of the ensemble of ``checkpoints`` (2 to 16 agents of one run).

    Args:
        checkpoints: the members' checkpoint files, best first.
        out_path: the ensemble checkpoint to write (atomically).
        evaluate: optional ``(agent, state) -> metrics`` scoring the ensemble on validation
            (e.g. :func:`trainer.pod.evaluate_checkpoint_state`); its ``score`` becomes the
            ensemble's.
        member_ids: the members' agent ids in the caller's records (the web app's), in the
            order of ``checkpoints``; stored as each member's ``id``. ``None``: no ids.
        total_env_steps: env steps of the members' lines with each agent counted once (the
            caller knows the lineage; members that share ancestors would count them twice in a
            sum). ``None``: the sum of the members' ``total_env_steps``, an upper bound.

    The ensemble has no generation of its own: its ``generation`` is ``None``; each member
    keeps its own (lineage depth) in ``agent.members[i].generation``.

    Returns:
        ``(sha256, state)`` of the written checkpoint.

    Raises:
        ConfigError: fewer than 2 or more than 16 members, or members that read different
            observations (field ``agents``); BundleError: an unreadable member.
    """
    from trainer.agents import make_agent

    paths = [str(p) for p in checkpoints]
    if not 2 <= len(paths) <= MAX_MEMBERS:
        raise ConfigError(f"agents: an ensemble needs 2 to {MAX_MEMBERS} agents, got {len(paths)}", field="agents")
    states = [load_checkpoint(p) for p in paths]
    if any(s["algorithm"] == ENSEMBLE for s in states):
        raise ConfigError("agents: an ensemble cannot contain another ensemble", field="agents")
    _same(states, lambda s: s.get("kind", "stock_trading"), "task kind", paths)
    _same(states, lambda s: (s["obs_dim"], s["action_dim"]), "observation or action sizes", paths)
    _same(states, lambda s: s["observation_layout"], "observation layout (tickers, indicators or statistics)", paths)
    _same(states, lambda s: s.get("feature_stats"), "feature statistics", paths)
    if member_ids is not None and len(member_ids) != len(paths):
        raise ConfigError(
            f"member_ids: {len(member_ids)} ids for {len(paths)} checkpoints; give one id per member",
            field="member_ids",
        )
    first = states[0]
    members = [
        {
            **({"id": int(member_ids[i])} if member_ids is not None else {}),
            "algorithm": s["algorithm"],
            "hyperparameters": s["hyperparameters"],
            "agent": s["agent"],
            "checkpoint_sha256": sha256_file(p),
            "score": s.get("score"),
            "generation": s.get("generation"),
        }
        for i, (s, p) in enumerate(zip(states, paths))
    ]
    state = {
        "created_at": utc_now(),
        "paddock_version": __version__,
        "algorithm": ENSEMBLE,
        "hyperparameters": {"members": len(members)},
        "agent": {"members": members},
        "obs_dim": first["obs_dim"],
        "action_dim": first["action_dim"],
        "observation_layout": first["observation_layout"],
        "env_config": first["env_config"],
        "kind": first.get("kind", "stock_trading"),
        "feature_stats": first.get("feature_stats"),
        "task": first["task"],
        "data_window": first.get("data_window"),
        "score": None,
        "metrics": {},
        "env_steps": 0,
        "total_env_steps": (
            int(total_env_steps)
            if total_env_steps is not None
            else sum(int(s.get("total_env_steps") or 0) for s in states)
        ),
        "generation": None,  # an ensemble is not a trained generation; its members have theirs
        "parent_sha256": None,
        "seed": 0,
        "cancelled": False,
    }
    if evaluate is not None:
        metrics = evaluate(build_members(state, make_agent), state)
        state["metrics"] = metrics
        state["score"] = float(metrics["score"])
    digest = save_checkpoint(state, out_path)
    return digest, state
