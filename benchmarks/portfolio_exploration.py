"""Where does a PPO portfolio agent trade: its mean action, or its exploration noise?

Trains one pod on the dow30-2020 window of ``benchmarks/learning_quality.py`` (train
2010-2018) for ``--generations`` generations and, after each, runs the agent on the
**validation** split (2019; the test split is never touched) two ways:

* deterministic: the policy mean, as evaluation, backtests and bundles run it;
* sampled: ``mean + exp(log_std) * noise`` clipped to [-1, 1], as the training rollouts act
  (``--samples`` envs in parallel).

It prints, per generation: the mean ``log_std``; the cross-stock spread of the mean action
(std over the N stock entries, in action units; logits are ``logit_scale`` x that); the mean
cash action; then for both ways the L1 distance of the traded weights from 1/N, the cash
weight and the daily turnover (after the first day), plus the cost that turnover pays at the
env's ``cost_pct``.

Usage: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/portfolio_exploration.py [--band B] [--penalty P] [--init-log-std S]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.learning_quality import Lineage, task_dict  # noqa: E402
from trainer.artifacts.checkpoints import load_checkpoint  # noqa: E402
from trainer.artifacts.rebuild import build_agent  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.envs.kinds import make_env, prepare_market  # noqa: E402
from trainer.envs.observations import FeatureStats  # noqa: E402
from trainer.evaluation import eval_config  # noqa: E402
from trainer.task import TaskSpec  # noqa: E402


@torch.no_grad()
def validation_stats(checkpoint: Path, market, samples: int, seed: int) -> dict[str, float]:
    state = load_checkpoint(checkpoint)
    task = TaskSpec.from_dict(state["task"])
    agent = build_agent(state)
    policy = agent.policy_module()
    log_std = agent.actor.log_std.detach()
    window = prepare_market(market, task.env).slice(*task.validation, name="validation")
    stats = FeatureStats.from_dict(state["feature_stats"]) if state.get("feature_stats") else None
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, float] = {"log_std": float(log_std.mean())}
    n = window.num_stocks
    for way, envs in (("det", 1), ("sampled", samples)):
        env = make_env(window, eval_config(task.env), num_envs=envs, feature_stats=stats)
        obs, _ = env.reset(options={"start_day": 0})
        l1, cash, turnover, spread, cash_action = [], [], [], [], []
        for day in range(window.num_days - 1):
            mean = policy(obs)
            action = mean
            if way == "sampled":
                action = (mean + log_std.exp() * torch.randn(mean.shape, generator=gen)).clamp(-1, 1)
            obs, _, _, _, info = env.step(action)
            w = info["target_weights"]
            l1.append(float((w[:, :n] - 1.0 / n).abs().sum(1).mean()))
            cash.append(float(w[:, n].mean()))
            if day > 0:
                turnover.append(float(info["turnover"].mean()))
            spread.append(float(mean[:, :n].std(1).mean()))
            cash_action.append(float(mean[:, n].mean()))
        out[f"{way}_l1"], out[f"{way}_cash"], out[f"{way}_turnover"] = map(np.mean, (l1, cash, turnover))
        out["spread"], out["cash_action"] = float(np.mean(spread)), float(np.mean(cash_action))
    out["cost_pct"] = task.env.cost_pct
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", type=int, default=3)
    parser.add_argument("--generation-steps", type=int, default=65_536)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--band", type=float, default=0.0)
    parser.add_argument("--penalty", type=float, default=0.0)
    parser.add_argument("--init-log-std", type=float)
    parser.add_argument(
        "--data-dir", default=os.environ.get("PADDOCK_DATA_DIR") or str(REPO.parent / "shared" / "data")
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = TaskSpec.from_dict(task_dict("dow30-2020", "portfolio", (args.band, args.penalty, args.init_log_std)))
    market = load_market_data(task.data, data_dir=args.data_dir)
    print(
        f"# portfolio exploration: dow30-2020 validation (2019), band {args.band:g}, penalty {args.penalty:g}, "
        f"init_log_std {args.init_log_std if args.init_log_std is not None else 'default'}, "
        f"{args.generation_steps:,} env steps per generation, seed {args.seed}\n"
    )
    print(
        "| generation | mean log_std | mean-action spread over stocks | mean cash action | "
        "deterministic: L1 from 1/N / cash / turnover per day | sampled: L1 from 1/N / cash / turnover per day |"
    )
    print("|---:|---:|---:|---:|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Lineage(task, market, Path(tmp) / "fresh", 4096)  # one rollout of 256 x 16: ~untrained
        fresh.workdir.mkdir()
        lineage = Lineage(task, market, Path(tmp) / "pod", args.generation_steps)
        lineage.workdir.mkdir()
        parent = None
        for g in range(args.generations + 1):
            if g == 0:
                path, _ = fresh.generation(seed=args.seed)
                label = "one rollout"
            else:
                path, _ = lineage.generation(parent=parent, seed=args.seed * 1000 + g)
                parent, label = path, f"{g} ({g * args.generation_steps:,} steps)"
            s = validation_stats(path, market, args.samples, args.seed)
            c = s["cost_pct"]
            print(
                f"| {label} | {s['log_std']:.2f} | {s['spread']:.3f} | {s['cash_action']:.2f} | "
                f"{s['det_l1']:.3f} / {100 * s['det_cash']:.1f} % / {100 * s['det_turnover']:.1f} % "
                f"(cost {1e4 * c * s['det_turnover']:.1f} bp) | "
                f"{s['sampled_l1']:.3f} / {100 * s['sampled_cash']:.1f} % / {100 * s['sampled_turnover']:.1f} % "
                f"(cost {1e4 * c * s['sampled_turnover']:.1f} bp) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
