"""Downloadable agent bundles (inference only): the format and :func:`export_bundle`; reading a
bundle back is :mod:`trainer.artifacts.bundle_reader` (re-exported here), checkpoints are
:mod:`trainer.artifacts.checkpoints`.

**Bundle**: a zip for users, holding

* ``policy.safetensors``: the actor's tensors (``agent.policy_module().state_dict()``: raw
  observation in, deterministic action in [-1, 1] out, normalizer included);
* ``config.json``: everything needed to rebuild and feed the actor (observation layout,
  tickers, indicators, normalization statistics, env parameters, data window, algorithm,
  hyperparameters and network architecture, Paddock version);
* ``policy.onnx``: the same actor for ONNX runtimes (input ``obs`` (B, obs_dim) float32, output
  ``action`` (B, action_dim) float32);
* ``README.md``: a short model card;
* ``SHA256SUMS``: ``<sha256>  <name>`` of every other member, checked on load.

Every file is written atomically (:func:`trainer.artifacts.checkpoints.atomic_write_bytes`). Loading
never unpickles arbitrary objects: bundles go through safetensors and JSON only.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import io
import json
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from trainer.artifacts.bundle_reader import BUNDLE_FORMAT, BUNDLE_VERSION
from trainer.artifacts.checkpoints import load_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.data.timestamps import TRADING_DAYS_PER_YEAR
from trainer.errors import BundleError
from trainer.util.files import atomic_write_bytes, sha256_bytes, sha256_file
from trainer.version import __version__

__all__ = ["export_bundle"]


def _export_onnx(policy: torch.nn.Module, obs_dim: int) -> bytes:
    """Export ``policy`` (raw obs -> action) to ONNX bytes with a dynamic batch dimension.

    The TorchScript-based exporter is used: it handles these small MLPs in milliseconds, where
    the ``torch.export``-based one takes seconds per bundle; both give the same graph here.
    """
    example = torch.zeros((2, obs_dim), dtype=torch.float32)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            policy,
            (example,),
            buf,
            input_names=["obs"],
            output_names=["action"],
            dynamic_axes={"obs": {0: "batch"}, "action": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    return buf.getvalue()


def _model_card(config: dict[str, Any]) -> str:
    metrics = config.get("validation_metrics") or {}
    window = config.get("data_window") or {}
    hp = config.get("hyperparameters") or {}

    def pct(x: Any) -> str:
        return "n/a" if x is None else f"{100 * float(x):.2f} %"

    def num(x: Any) -> str:
        return "n/a" if x is None else f"{float(x):.3f}"

    task = "portfolio-allocation" if config.get("kind") == "portfolio" else "stock-trading"
    ensemble = config.get("ensemble")
    lines = [
        f"# Paddock agent ({config['algorithm'].upper()})",
        "",
        f"A deep-RL {task} policy trained by Paddock (tournament-based ensemble training,",
        "ElegantRL-Podracer, Liu et al. 2021, arXiv 2112.05923). Research artefact, not investment advice.",
        "",
        "## What it does",
        "",
        f"- Trades {len(config['tickers'])} tickers: {' '.join(config['tickers'])}.",
        f"- Indicators: {', '.join(config['indicators'])}.",
        f"- Observation: {config['architecture']['obs_dim']} float32 values (layout in `config.json`,",
        *_action_lines(config),
        (
            f"- Ensemble of {len(ensemble['members'])} agents ({_members_text(ensemble['members'])}): "
            "the mean of their actions."
            if ensemble
            else f"- Network: {_network_text(config['algorithm'], hp)}."
        ),
        "",
        "## Data and evaluation",
        "",
        f"- Train: {' to '.join(window.get('train', []))}; validation: {' to '.join(window.get('validation', []))};",
        f"  test (untouched in training): {' to '.join(window.get('test', []))}.",
        f"- Validation (deterministic policy, full window): Sharpe {num(metrics.get('sharpe_ratio'))},",
        f"  total return {pct(metrics.get('total_return'))}, max drawdown {pct(metrics.get('max_drawdown'))}.",
        *_baseline_lines(metrics, num, pct),
        *_test_lines(config.get("test_metrics"), num, pct),
        (
            f"- Env steps trained: {config.get('total_env_steps')} (the members' lines, each agent counted "
            "once); an ensemble has no generation of its own."
            if ensemble
            else f"- Env steps trained: {config.get('total_env_steps')}; generation {config.get('generation')}."
        ),
        "",
        "## Use",
        "",
        "```python",
        "import trainer",
        "agent = trainer.load_agent('bundle.zip')",
        "actions = agent.act(obs)  # (B, obs_dim) float32 -> (B, action_dim) in [-1, 1]",
        "```",
        "",
        "Or run `policy.onnx` (input `obs`, output `action`) with ONNX Runtime.",
        "",
        "## Limitations",
        "",
        f"Survivorship bias (today's index members), {_bars_text(window)}, trades at the close of",
        "each bar with fixed proportional costs, no slippage or market impact. Past performance",
        "says little about the future.",
        "",
        *_provenance_lines(config.get("provenance")),
        f"Paddock {config['paddock_version']}, checkpoint SHA-256 {config['checkpoint_sha256']}.",
        "",
    ]
    return "\n".join(lines)


def _cross_sectional(algorithm: str, hp: Mapping[str, Any]) -> bool:
    """Whether the agent's actor is the cross-sectional policy (the direct learner's always is;
    PPO's and A2C's with ``policy="cross_sectional"``)."""
    return algorithm == "direct" or hp.get("policy") == "cross_sectional"


def _network_text(algorithm: str, hp: Mapping[str, Any]) -> str:
    """The model card's line on the actor network."""
    if _cross_sectional(algorithm, hp):
        return (
            f"cross-sectional policy: one MLP {hp.get('hidden_sizes')} shared by every ticker, a pooled context, "
            f"the tilt from equal weight bounded by kappa = {hp.get('kappa')}; it reads the raw observation"
        )
    return f"actor MLP {hp.get('hidden_sizes')}, observation normalizer included"


def _pipeline_text(algorithm: str, hp: Mapping[str, Any]) -> str:
    """``config.json``'s ``architecture.policy``: what the exported module computes."""
    if _cross_sectional(algorithm, hp):
        return "raw obs -> cross-sectional policy (shared per-ticker MLP, pooled context, tilt <= kappa) -> clip to [-1, 1]"
    return "raw obs -> observation normalizer -> actor MLP -> clip to [-1, 1]"


def _test_lines(test: Mapping[str, Any] | None, num: Any, pct: Any) -> list[str]:
    """The backtest over the test split, when there is one."""
    if not test:
        return ["- Test: not backtested yet (its figures appear here once a backtest of the test split exists)."]
    agent = test.get("agent") or {}
    lines = [
        f"- Test ({test.get('start')} to {test.get('end')}, backtest): Sharpe {num(agent.get('sharpe_ratio'))},",
        f"  total return {pct(agent.get('total_return'))}, max drawdown {pct(agent.get('max_drawdown'))}.",
    ]
    for key, label in (("QQQ", "QQQ buy-and-hold"), ("equal_weight", "equal weight (1/N)")):
        other = test.get(key) or {}
        if other:
            lines.append(
                f"  {label}: Sharpe {num(other.get('sharpe_ratio'))}, total return {pct(other.get('total_return'))}."
            )
    return lines


def _provenance_lines(found: Mapping[str, Any] | None) -> list[str]:
    """What produced the agent (code, packages, data, seed), when recorded."""
    if not found:
        return []
    packages = found.get("packages") or {}
    return [
        "## Reproducibility",
        "",
        f"- Code: {found.get('code_version')}; torch {packages.get('torch')}, numpy {packages.get('numpy')},",
        f"  Python {packages.get('python')}.",
        f"- Data: {found.get('data_sha256')} (SHA-256 over the data files' digests).",
        f"- Seed: {found.get('seed') if found.get('seed') is not None else 'none (built from its members)'}.",
        "",
    ]


def _baseline_lines(metrics: dict[str, Any], num: Any, pct: Any) -> list[str]:
    """The validation baselines on the same days, next to the agent's figures: the untrained
    policy's score and Sharpe ratio, 1/N's (rebalanced daily) and QQQ's Sharpe ratio and total
    return; nothing for metrics that hold none (an older checkpoint)."""
    untrained = metrics.get("untrained") or {}
    equal = metrics.get("vs_equal_weight") or {}
    qqq = metrics.get("vs_QQQ") or {}
    if not (untrained or equal or qqq):
        return []
    lines = ["- Baselines on the same validation days (an edge on validation is no promise out of sample):"]
    if untrained:
        lines.append(
            f"  untrained policy Sharpe {num(untrained.get('sharpe_ratio'))}, score {num(untrained.get('score'))} "
            f"(this agent's score {num(metrics.get('score'))}, rule: {(metrics.get('selection') or {}).get('description', 'n/a')});"
        )
    if equal:
        lines.append(
            f"  1/N rebalanced daily Sharpe {num(equal.get('baseline_sharpe'))}, "
            f"total return {pct(equal.get('baseline_total_return'))};"
        )
    if qqq:
        lines.append(
            f"  QQQ buy and hold Sharpe {num(qqq.get('baseline_sharpe'))}, total return {pct(qqq.get('baseline_total_return'))}."
        )
    for key, who in (("vs_equal_weight", "cost-free 1/N"), ("vs_equal_weight_with_costs", "1/N with the task's costs")):
        rel = metrics.get(key) or {}
        if rel.get("verdict"):
            low, high = rel["ci95"]
            lines.append(
                f"- Against {who} on the same validation days: {rel['verdict']} (Sharpe difference "
                f"{num(rel.get('sharpe_difference'))}, 95 % interval {num(low)} to {num(high)} from a studentised "
                f"block bootstrap, Ledoit & Wolf 2008; one-sided p = {num(rel.get('p_value'))}; "
                f"information ratio {num(rel.get('information_ratio'))})."
            )
    return lines


def _bars_text(window: dict[str, Any]) -> str:
    """``"daily bars"`` or ``"intraday bars (78 a session)"``, from the window's
    ``periods_per_year`` (252 x bars a session), or for checkpoints written before that field
    from whether its dates carry a time of day."""
    periods = window.get("periods_per_year")
    if periods is None:
        first = (window.get("train") or [""])[0]
        return "intraday bars" if ":" in str(first) else "daily bars"
    per_session = int(periods) // TRADING_DAYS_PER_YEAR
    return "daily bars" if per_session <= 1 else f"intraday bars ({per_session} a session)"


def _members_text(members: list[dict[str, Any]]) -> str:
    """``"#48 generation 12, #46 generation 11"``; members without an id are numbered 1, 2..."""
    return ", ".join(
        f"{'#' + str(m['id']) if m.get('id') is not None else f'member {i}'} generation {m.get('generation')}"
        for i, m in enumerate(members, start=1)
    )


def _action_lines(config: dict[str, Any]) -> list[str]:
    if config.get("kind") == "portfolio":
        return [
            "  `observation_layout`); action: one value in [-1, 1] per ticker and one for cash, mapped to",
            "  target weights by a softmax (zero action = equal weight); the portfolio is rebalanced",
            "  to them at each close.",
        ]
    return [
        "  `observation_layout`); action: one value in [-1, 1] per ticker, times `hmax` shares",
        f"  (hmax = {config['env_config'].get('hmax')}); negative sells, positive buys.",
    ]


def _zip_bytes(members: dict[str, bytes], created_at: str | None) -> bytes:
    """Deterministic zip: fixed member order and timestamps (from the checkpoint's creation)."""
    stamp = (1980, 1, 1, 0, 0, 0)
    if created_at:
        with contextlib.suppress(ValueError):
            t = _dt.datetime.fromisoformat(created_at.replace("Z", "+00:00"))
            stamp = (max(t.year, 1980), t.month, t.day, t.hour, t.minute, t.second)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


def export_bundle(
    checkpoint_path: str | Path,
    out_path: str | Path,
    *,
    ensemble_members: Sequence[Mapping[str, Any]] | None = None,
    total_env_steps: int | None = None,
    provenance: Mapping[str, Any] | None = None,
    test_metrics: Mapping[str, Any] | None = None,
) -> str:
    """Write a downloadable agent bundle (zip) from a checkpoint; return the zip's SHA-256.

    The actor is rebuilt from the checkpoint with the project's own classes, its
    ``policy_module()`` (raw observation -> deterministic action, normalizer included) is saved
    as safetensors and exported to ONNX. See the module doc for the members. Exporting the same
    checkpoint twice gives byte-identical zips.

    Args:
        checkpoint_path: a checkpoint written by :func:`trainer.pod.run_generation`.
        out_path: destination zip (written atomically; its folder is created).
        ensemble_members: ensembles only: ``{"id": agent id, "generation": lineage depth}`` of each
            member (the web app's records), in the checkpoint's member order; they replace the
            ``id`` and ``generation`` stored in the checkpoint.
        total_env_steps: ensembles only: env steps of the members' lines, each agent counted
            once; replaces the checkpoint's value (older ensemble checkpoints summed the
            members' lines, counting shared ancestors more than once).
        provenance: what produced the agent (``trainer.provenance.provenance``: code version,
            package versions, data hash, seed), written to ``config.json`` and the model card.
        test_metrics: a backtest over the task's test split, ``{"start", "end", "agent":
            {"sharpe_ratio", "total_return", "max_drawdown"}, "QQQ": {...}, "equal_weight":
            {...}}`` (rates as fractions); the model card shows its figures.

    An ensemble's ``config.json`` has ``generation`` ``null`` and an ``ensemble`` object with
    its ``members`` (``id`` where known, ``generation``, ``algorithm``, ``score``...) and
    ``total_env_steps``; its model card says so.

    Returns:
        Hex SHA-256 of the zip file.

    Raises:
        BundleError: the checkpoint is missing, corrupt, does not rebuild into an agent or
            holds NaN or infinite numbers (a diverged agent), or the bundle cannot be written;
            ``ensemble_members`` for a checkpoint that is not an ensemble or of the wrong length
            (field ``ensemble_members``).
    """
    from safetensors.torch import save as safetensors_save

    checkpoint_sha = sha256_file(checkpoint_path)
    state = load_checkpoint(checkpoint_path)
    try:
        agent = build_agent(state)
    except BundleError as exc:
        raise BundleError(f"checkpoint {checkpoint_path}: {exc.message}", file=str(checkpoint_path)) from exc
    policy = agent.policy_module().to("cpu").eval()
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in policy.state_dict().items()}
    # one metadata key: safetensors stores metadata in a hash map whose order varies between runs
    weights = safetensors_save(tensors, metadata={"paddock": f"policy of a {state['algorithm']} agent"})
    onnx_bytes = _export_onnx(policy, int(state["obs_dim"]))

    config = _bundle_config(state, policy, tensors, checkpoint_sha, provenance=provenance, test_metrics=test_metrics)
    _add_ensemble(config, state, ensemble_members=ensemble_members, total_env_steps=total_env_steps)
    config_bytes = json.dumps(config, indent=2, sort_keys=False, allow_nan=False).encode()
    members = {
        "policy.safetensors": weights,
        "config.json": config_bytes,
        "policy.onnx": onnx_bytes,
        "README.md": _model_card(config).encode(),
    }
    sums = "".join(f"{sha256_bytes(data)}  {name}\n" for name, data in members.items())
    members["SHA256SUMS"] = sums.encode()
    return atomic_write_bytes(out_path, _zip_bytes(members, state.get("created_at")))


def _bundle_config(
    state: Mapping[str, Any],
    policy: Any,
    tensors: Mapping[str, Any],
    checkpoint_sha: str,
    *,
    provenance: Mapping[str, Any] | None,
    test_metrics: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """``config.json`` of a bundle (see the module doc) from the checkpoint ``state`` and its
    CPU ``policy`` module with its ``tensors``."""
    layout = state["observation_layout"]
    normalization = {
        k.split(".", 1)[1]: v.double().tolist() if v.ndim else float(v)
        for k, v in tensors.items()
        if k.startswith("normalizer.")
    }
    hp = dict(state["hyperparameters"])
    return {
        "format": BUNDLE_FORMAT,
        "format_version": BUNDLE_VERSION,
        "paddock_version": __version__,
        "created_at": state.get("created_at"),
        "algorithm": state["algorithm"],
        "hyperparameters": hp,
        "architecture": {
            "obs_dim": int(state["obs_dim"]),
            "action_dim": int(state["action_dim"]),
            "hidden_sizes": list(hp.get("hidden_sizes") or []),
            "policy": (
                "mean over members of (raw obs -> observation normalizer -> actor MLP -> clip to [-1, 1])"
                if state["algorithm"] == "ensemble"
                else _pipeline_text(state["algorithm"], hp)
            ),
            "policy_class": type(policy).__name__,
            "tensors": {k: list(v.shape) for k, v in tensors.items()},
            "onnx": {"input": "obs", "output": "action", "opset": 17, "dynamic_axes": ["batch"]},
        },
        "tickers": list(layout["tickers"]),
        "indicators": list(layout["feature_names"]),
        "observation_layout": layout,
        "normalization": {
            "applied_in_policy": bool(normalization),
            "obs_clip": hp.get("obs_clip"),
            "statistics": normalization,
        },
        "env_config": state["env_config"],
        "kind": state.get("kind", "stock_trading"),
        "feature_stats": state.get("feature_stats"),
        "data_window": state.get("data_window"),
        "task": state["task"],
        "score": state.get("score"),
        "validation_metrics": state.get("metrics"),
        "total_env_steps": state.get("total_env_steps"),
        "generation": state.get("generation"),
        "checkpoint_sha256": checkpoint_sha,
        "provenance": dict(provenance) if provenance else None,
        "test_metrics": dict(test_metrics) if test_metrics else None,
    }


def _add_ensemble(
    config: dict[str, Any],
    state: Mapping[str, Any],
    *,
    ensemble_members: Sequence[Mapping[str, Any]] | None,
    total_env_steps: int | None,
) -> None:
    """An ensemble's ``config.json`` entries: ``generation`` None, ``total_env_steps`` and the
    ``ensemble`` object with its members (``ensemble_members`` replace the stored ids and
    generations). Raises BundleError (field ``ensemble_members``) for a wrong count, or for
    either argument given with a checkpoint that is not an ensemble."""
    if state["algorithm"] == "ensemble":
        stored = [dict(m) for m in state["agent"]["members"]]
        if ensemble_members is not None:
            if len(ensemble_members) != len(stored):
                raise BundleError(
                    f"ensemble_members: {len(ensemble_members)} given for an ensemble of {len(stored)} members",
                    field="ensemble_members",
                )
            for m, given in zip(stored, ensemble_members):
                m.update({k: given[k] for k in ("id", "generation") if k in given})
        steps = int(total_env_steps) if total_env_steps is not None else state.get("total_env_steps")
        config["generation"] = None
        config["total_env_steps"] = steps
        config["ensemble"] = {
            "members": [
                {
                    k: m.get(k)
                    for k in ("id", "generation", "algorithm", "hyperparameters", "checkpoint_sha256", "score")
                }
                for m in stored
            ],
            "total_env_steps": steps,
        }
    elif ensemble_members is not None or total_env_steps is not None:
        raise BundleError(
            f"ensemble_members and total_env_steps apply to ensembles only; this checkpoint is a {state['algorithm']} agent",
            field="ensemble_members",
        )
