"""PPO training throughput on the Dow-30 env: Paddock vs Stable-Baselines3, measured in one run.

Both sides learn (collect rollouts *and* update the networks) with PPO on the same market data
(the demo task's train split, 2010-2019, 29 tickers, FinRL's 8 indicators) and the same trading
rules; env-steps/s counts transitions per wall-clock second including the updates.

* Paddock: :class:`trainer.envs.StockTradingVecEnv` with ``num_envs`` 1024 and PPOConfig's
  defaults (rollout 16 x 1024, 2 epochs of 4 minibatches of 4096, 64x64 tanh MLPs).
* Stable-Baselines3: ``PPO("MlpPolicy")`` with its defaults (n_steps 2048, batch 64, 10
  epochs) on 8 copies of our Gymnasium adapter (``Paddock/StockTrading-v0``) in a
  ``DummyVecEnv``, with our network sizes (``hidden_sizes`` of the Paddock config, tanh; the
  default 64x64 is also SB3's own default).

Each side is timed with the wall clock and with ``time.process_time`` (CPU seconds of this
process): when other processes share the CPU the wall-clock figures drop, the CPU-time ones
much less, so both ratios are printed. ``--repeats`` times each side several times and keeps
its best run.

Usage::

    .venv/bin/python benchmarks/train_throughput.py --data-dir ../shared/data [--device cuda]

Both sides use the same torch thread count (``--threads``, default 1).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from trainer.agents import make_agent  # noqa: E402
from trainer.agents.ppo import PPOConfig  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.demo import demo_task_dict
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.task import TaskSpec
from trainer.util.device import configure_device, pick_device  # noqa: E402

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


def _timed(fn) -> tuple[float, float]:
    """Run ``fn()`` and return (wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _result(steps: int, wall: float, cpu: float) -> dict:
    return {
        "steps": steps,
        "seconds": wall,
        "cpu_seconds": cpu,
        "steps_per_s": steps / wall,
        "steps_per_cpu_s": steps / cpu,
    }


def measure_ours(train, *, device: torch.device, env_steps: int, num_envs: int, hyperparameters: dict) -> dict:
    env = StockTradingVecEnv(train, EnvConfig(), num_envs=num_envs, device=device, seed=0, state_info=False)
    agent = make_agent(
        "ppo", env.obs_dim, env.action_dim, {**hyperparameters, "num_envs": num_envs}, device=device, seed=0
    )
    per_rollout = agent.hyperparameters()["rollout_steps"] * num_envs
    agent.learn(env, per_rollout)  # warm-up: allocations, first kernels
    stats: dict = {}

    def run() -> None:
        stats.update(agent.learn(env, env_steps))
        if device.type == "cuda":
            torch.cuda.synchronize()

    if device.type == "cuda":
        torch.cuda.synchronize()
    wall, cpu = _timed(run)
    return _result(int(stats["env_steps"]), wall, cpu)


def measure_sb3(train, *, env_steps: int, hidden_sizes: list[int], num_envs: int = 8) -> dict:
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    import trainer.envs  # noqa: F401  (registers Paddock/StockTrading-v0)

    def make(i: int):
        return lambda: gym.make("Paddock/StockTrading-v0", data=train, config=EnvConfig(), seed=i)

    vec = DummyVecEnv([make(i) for i in range(num_envs)])
    arch = list(hidden_sizes)
    policy_kwargs = {"net_arch": {"pi": arch, "vf": arch}, "activation_fn": torch.nn.Tanh}
    model = PPO("MlpPolicy", vec, policy_kwargs=policy_kwargs, device="cpu", seed=0, verbose=0)
    rollout = model.n_steps * num_envs
    steps = max(rollout, env_steps // rollout * rollout)
    wall, cpu = _timed(lambda: model.learn(total_timesteps=steps))
    return _result(int(model.num_timesteps), wall, cpu)


def _best(runs: list[dict]) -> dict:
    """The run with the highest CPU-time throughput (the least disturbed by other processes)."""
    return max(runs, key=lambda r: r["steps_per_cpu_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--device", default="cpu", help="device of our agent/env (SB3 always runs on the CPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for both sides")
    parser.add_argument("--ours-steps", type=int, default=16 * 16 * 1024, help="env steps timed for Paddock")
    parser.add_argument("--sb3-steps", type=int, default=2048 * 8, help="env steps timed for SB3 (whole rollouts)")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=1, help="time each side this many times, keep the best")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    task = TaskSpec.from_dict(demo_task_dict())
    market = load_market_data(task.data, data_dir=args.data_dir, cache_dir=args.cache_dir)
    train = market.slice(*task.train, name="train")
    device = pick_device(args.device)
    configure_device(device)  # TF32 on CUDA, as a generation trains
    print(f"data: {train.num_stocks} tickers, {train.num_days} days ({train.dates[0]} to {train.dates[-1]})")
    print(f"torch threads: {args.threads}; our device: {device}")

    hp = PPOConfig().to_dict()
    ours = _best(
        [
            measure_ours(train, device=device, env_steps=args.ours_steps, num_envs=args.num_envs, hyperparameters=hp)
            for _ in range(args.repeats)
        ]
    )
    sb3 = _best(
        [measure_sb3(train, env_steps=args.sb3_steps, hidden_sizes=hp["hidden_sizes"]) for _ in range(args.repeats)]
    )
    wall_ratio = ours["steps_per_s"] / sb3["steps_per_s"]
    cpu_ratio = ours["steps_per_cpu_s"] / sb3["steps_per_cpu_s"]
    arch = "x".join(str(h) for h in hp["hidden_sizes"])
    rows = [
        (
            f"Paddock PPO ({args.num_envs} envs, {device}, {arch}, {hp['update_epochs']} epochs x "
            f"{hp['num_minibatches']} minibatches)",
            ours,
        ),
        (f"Stable-Baselines3 PPO (8 envs, DummyVecEnv, cpu, {arch}, defaults)", sb3),
    ]
    print("\n| run | env steps | wall s | CPU s | env-steps/s (wall) | env-steps per CPU-s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(
            f"| {name} | {r['steps']:,} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
            f"{r['steps_per_s']:,.0f} | {r['steps_per_cpu_s']:,.0f} |"
        )
    print(f"| **ratio Paddock / SB3** (target >= 20x) | | | | **{wall_ratio:.1f}x** | **{cpu_ratio:.1f}x** |")


if __name__ == "__main__":
    main()
