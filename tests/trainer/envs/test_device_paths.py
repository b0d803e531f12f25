"""The accelerator path of the stock-trading env, run on the CPU against the CPU path.

On an accelerator the env steps without host syncs (``sync_free``: ``torch.where`` over every
env instead of skipping work) and keeps holdings/prices/trades in float32 (``share_dtype``).
Both are chosen by device but can be forced, so they are checked here against the exact CPU
shortcut path.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.errors import ConfigError

STEPS = 120


def _actions(num_envs: int, num_stocks: int, steps: int) -> list[torch.Tensor]:
    """Buy-heavy random actions (envs run out of cash, so the cash cap binds)."""
    g = torch.Generator().manual_seed(11)
    return [torch.rand((num_envs, num_stocks), generator=g) * 2.4 - 0.9 for _ in range(steps)]


def _rollout(env: StockTradingVecEnv, actions: list[torch.Tensor], start_day: int | None = None) -> list[tuple]:
    obs, info = env.reset(seed=5, options={"start_day": start_day} if start_day is not None else None)
    out = [(obs, info)]
    for a in actions:
        out.append(env.step(a))
    return out


def _flatten(step) -> list[torch.Tensor]:
    if len(step) == 2:
        obs, info = step
        return [obs, *info.values()]
    obs, reward, terminated, truncated, info = step
    return [obs, reward, terminated, truncated, *info.values()]


def test_the_sync_free_path_gives_the_cpu_shortcuts_results_bit_for_bit(dow30_market):
    # Fixed start days (both paths then draw no random numbers), around a turbulent day, with
    # buy-heavy actions: liquidations, capped buys and auto-resets all happen.
    turbulence = dow30_market.turbulence
    threshold = float(np.quantile(turbulence[turbulence > 0], 0.9))
    first_turbulent = int(np.argmax(turbulence >= threshold))
    config = EnvConfig(turbulence_threshold=threshold, episode_length=7, random_start=False, initial_cash=20_000.0)
    actions = _actions(48, dow30_market.num_stocks, STEPS)
    shortcut = StockTradingVecEnv(dow30_market, config, num_envs=48, sync_free=False)
    sync_free = StockTradingVecEnv(dow30_market, config, num_envs=48, sync_free=True)
    start = first_turbulent - 3
    capped = 0
    for a, b in zip(_rollout(shortcut, actions, start), _rollout(sync_free, actions, start), strict=True):
        for x, y in zip(_flatten(a), _flatten(b), strict=True):
            assert x.dtype == y.dtype and torch.equal(x, y)
        if len(a) == 5:
            capped += int((a[4]["cash"] < 0.1 * config.initial_cash).sum())
    assert capped > 0, "the cash cap bound in some steps"
    assert shortcut.share_dtype == sync_free.share_dtype == torch.float64


def test_the_sync_free_path_with_random_starts_keeps_episodes_and_cash_rules(dow30_market):
    threshold = float(np.quantile(dow30_market.turbulence[dow30_market.turbulence > 0], 0.9))
    config = EnvConfig(turbulence_threshold=threshold, episode_length=20, randomize_initial=True)
    env = StockTradingVecEnv(dow30_market, config, num_envs=256, sync_free=True, seed=3)
    obs, info = env.reset(seed=3)
    lengths = torch.zeros(256, dtype=torch.long)
    finished = []
    for a in _actions(256, dow30_market.num_stocks, 60):
        obs, reward, terminated, truncated, info = env.step(a)
        lengths += 1
        finished.append(lengths[truncated].clone())
        lengths[truncated] = 0
        assert (info["cash"] >= 0).all() and (info["holdings"] >= 0).all()
        assert torch.equal(obs[~truncated], info["final_observation"][~truncated])
    finished = torch.cat(finished)
    assert finished.numel() >= 256 * 2 and (finished == 20).all()
    assert env.day.unique().numel() > 50, "new episodes start on random days, not all on one"


def test_float32_shares_track_the_float64_reference(dow30_market):
    """Equivalence of the accelerator dtypes: same actions, same random starts, 120 days.

    Where the cash cap binds, the float32 path keeps a larger margin (1e-6 of the buy instead of
    1e-12, so that float32 rounding never spends more than the cash) and may floor a buy to one
    share fewer; such an env then holds other shares than the float64 one. Every other env
    must agree to float32 rounding.
    """
    config = EnvConfig(episode_length=60, randomize_initial=True)
    actions = _actions(128, dow30_market.num_stocks, STEPS)
    exact = StockTradingVecEnv(dow30_market, config, num_envs=128, seed=2)
    f32 = StockTradingVecEnv(dow30_market, config, num_envs=128, seed=2, share_dtype=torch.float32)
    assert exact.share_dtype == torch.float64 and f32.share_dtype == torch.float32
    diverged = torch.zeros(128, dtype=torch.bool)
    worst_same, worst_diverged, worst_reward = 0.0, 0.0, 0.0
    for a, b in zip(_rollout(exact, actions)[1:], _rollout(f32, actions)[1:], strict=True):
        _, reward_a, _, trunc_a, info_a = a
        _, reward_b, _, trunc_b, info_b = b
        assert torch.equal(trunc_a, trunc_b) and torch.equal(info_a["day"], info_b["day"])
        assert info_b["holdings"].dtype == torch.float32 and info_b["cash"].dtype == torch.float64
        assert info_b["portfolio_value"].dtype == torch.float64
        assert (info_b["cash"] >= 0).all(), "float32 rounding never spends more than the cash"
        diverged |= (info_a["holdings"] != info_b["holdings"].double()).any(1)
        rel = (info_a["portfolio_value"] - info_b["portfolio_value"]).abs() / info_a["portfolio_value"]
        worst_same = max(worst_same, float(rel[~diverged].max()))
        worst_reward = max(worst_reward, float((reward_a - reward_b)[~diverged].abs().max()))
        if diverged.any():
            worst_diverged = max(worst_diverged, float(rel[diverged].max()))
    assert worst_same < 2e-7, worst_same  # cents on a million
    assert worst_reward < 5e-5, worst_reward  # reward = USD change x 1e-4: under a dollar
    assert int(diverged.sum()) <= 8, int(diverged.sum())  # 3 of 128 when written
    assert worst_diverged < 1e-3, worst_diverged  # a share or two apart


def test_the_sync_free_path_holds_a_nan_action_and_counts_it(two_stocks):
    # The CPU path refuses it (a host sync per step); the sync-free path cannot without one.
    env = StockTradingVecEnv(two_stocks, EnvConfig(random_start=False), num_envs=2, sync_free=True)
    action = torch.tensor([[float("nan"), 0.5], [0.5, float("inf")]])
    obs, reward, terminated, truncated, info = env.step(action)
    assert info["holdings"].tolist() == [[0.0, 50.0], [50.0, 0.0]]
    assert int(env.nonfinite_steps) == 1
    env.step(torch.zeros(2, 2))
    assert int(env.nonfinite_steps) == 1
    with pytest.raises(ValueError):
        StockTradingVecEnv(two_stocks, EnvConfig(random_start=False), num_envs=2).step(action)


def test_accelerator_defaults_follow_the_device(dow30_market):
    cpu = StockTradingVecEnv(dow30_market, num_envs=2)
    assert cpu.sync_free is False and cpu.share_dtype == torch.float64
    with pytest.raises(ConfigError) as info:
        StockTradingVecEnv(dow30_market, num_envs=2, share_dtype=torch.float16)
    assert info.value.details == {"field": "share_dtype"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_cuda_the_env_defaults_to_the_sync_free_float32_path(dow30_market):
    env = StockTradingVecEnv(dow30_market, num_envs=2, device="cuda")
    assert env.sync_free is True and env.share_dtype == torch.float32
