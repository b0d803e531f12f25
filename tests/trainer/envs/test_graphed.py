"""The CUDA-graph replay of the sync-free env steps (``trainer/envs/graphed.py``) equals eager.

Runs where CUDA exists (the device check runs the same comparison at 4,096 and 65,536 envs);
skipped elsewhere. The counter-based draws of the sync-free step (``counter_random``) are
checked on every machine.
"""

from __future__ import annotations

import pytest
import torch

from trainer.envs.counter_random import counter_bits, counter_randint, counter_uniform
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv

E = 64


def test_counter_draws_are_a_pure_function_of_key_counter_and_stream():
    key, counter = torch.tensor(12345), torch.tensor(7)
    a = counter_bits(key, counter, 0, (4, 1000))
    assert torch.equal(a, counter_bits(key, counter, 0, (4, 1000)))
    assert not torch.equal(a, counter_bits(key, counter + 1, 0, (4, 1000)))
    assert not torch.equal(a, counter_bits(key, counter, 1, (4, 1000)))
    assert int(a.min()) >= 0 and int(a.max()) < 2**31
    days = counter_randint(250, key, counter, 2, (100_000,))
    counts = torch.bincount(days, minlength=250).double()
    assert int(days.min()) == 0 and int(days.max()) == 249
    assert float(counts.std() / counts.mean()) < 0.1  # ~0.05 for uniform draws (400 per day)
    u = counter_uniform(key, counter, 3, (100_000,), torch.float32)
    assert 0.0 <= float(u.min()) and float(u.max()) < 1.0 and abs(float(u.mean()) - 0.5) < 0.01


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["portfolio", "stock_trading"])
def test_the_cuda_graph_step_equals_the_eager_step_through_episode_ends(two_stocks, kind):
    from trainer.envs.graphed import CudaGraphStep

    def make():
        if kind == "portfolio":
            return PortfolioVecEnv(two_stocks, PortfolioConfig(episode_length=3), num_envs=E, device="cuda", seed=1)
        config = EnvConfig(episode_length=3, randomize_initial=True)
        return StockTradingVecEnv(two_stocks, config, num_envs=E, device="cuda", seed=1)

    eager, twin = make(), make()
    graphed = CudaGraphStep(twin, warmup=3)
    g = torch.Generator(device="cuda").manual_seed(2)
    warm = torch.zeros((E, eager.action_dim), device="cuda")
    for _ in range(3):  # the graph's warm-up steps, mirrored
        eager.step(warm)
    ends = 0
    for _ in range(9):
        a = torch.rand((E, eager.action_dim), device="cuda", generator=g) * 2 - 1
        expected, got = eager.step(a), graphed(a)
        for x, y in zip(expected[:4], got[:4], strict=True):
            torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-5)
        for name, x in expected[4].items():
            torch.testing.assert_close(got[4][name], x, rtol=1e-5, atol=1e-4, msg=name)
        ends += int(expected[3].sum())
    assert ends >= 2 * E
