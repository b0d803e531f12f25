"""The sync-free env steps as one compiled graph (issue 27): no graph break, equal to eager.

Both market envs' sync-free steps (the accelerator default, forced here on the CPU) must trace
as a single graph, including the steps on which episodes end and restart, and the compiled step
must give the eager step's results. Tolerance: integers and booleans exactly; floats to
``rtol=1e-5`` plus ``1e-5`` of the field's largest magnitude (inductor fuses and reorders
float32 arithmetic: the float32 differential Sharpe reward divides by ``(B - A^2)^1.5 ~ 1e-6``
and so amplifies one-ulp differences of its moments to ~1e-5; a cash weight of 1e-7 times a
million USD differs by cents: USD fields are compared to the largest portfolio value). The ``aot_eager`` backend agrees bit for bit. The inductor test
(C++ code generation: minutes on a loaded 2-core machine with a cold cache) is marked slow.
"""

from __future__ import annotations

import pytest
import torch

from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv

USD_FIELDS = ("cash", "costs")
STEPS = 7  # episodes of 3 steps: two rounds of resets
E = 8


def _portfolio(two_stocks):
    config = PortfolioConfig(episode_length=3, reward="differential_sharpe", rebalance_band=0.01)
    return PortfolioVecEnv(two_stocks, config, num_envs=E, seed=4, sync_free=True, dtype=torch.float32)


def _stock(two_stocks):
    config = EnvConfig(episode_length=3, randomize_initial=True)
    return StockTradingVecEnv(two_stocks, config, num_envs=E, seed=4, sync_free=True, share_dtype=torch.float32)


MAKERS = {"portfolio": _portfolio, "stock_trading": _stock}


def _actions(env, steps=STEPS):
    g = torch.Generator().manual_seed(7)
    return [torch.rand((E, env.action_dim), generator=g) * 2.2 - 1.1 for _ in range(steps)]


def _flat(out):
    obs, reward, terminated, truncated, info = out
    return {"obs": obs, "reward": reward, "terminated": terminated, "truncated": truncated, **info}


def _assert_close(eager, compiled):
    assert eager.keys() == compiled.keys()
    for name, x in eager.items():
        y = compiled[name]
        assert x.dtype == y.dtype and x.shape == y.shape, name
        if x.is_floating_point():
            scale = max(1.0, float(x.abs().max()))
            if name in USD_FIELDS:  # weights times the portfolio value: errors scale with the value
                scale = max(scale, float(eager["portfolio_value"].abs().max()))
            torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-5 * scale, msg=name)
        else:
            assert torch.equal(x, y), name


def _compare(two_stocks, kind, backend):
    eager, twin = MAKERS[kind](two_stocks), MAKERS[kind](two_stocks)
    step = torch.compile(twin.step, fullgraph=True, backend=backend)
    ends = 0
    for a in _actions(eager):
        expected, got = _flat(eager.step(a)), _flat(step(a))
        _assert_close(expected, got)
        ends += int(expected["truncated"].sum())
    assert ends >= 2 * E, "episodes ended and restarted inside the compiled step"
    assert torch.equal(eager.day, twin.day)


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_the_sync_free_step_traces_as_one_graph_through_episode_ends(two_stocks, kind):
    env = MAKERS[kind](two_stocks)
    actions = _actions(env)
    for a in actions[:3]:  # the third step ends every episode
        env.step(a)
    explained = torch._dynamo.explain(env.step)(actions[3])
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    assert explained.graph_count == 1


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_the_step_compiles_with_fullgraph_and_equals_eager(two_stocks, kind):
    torch._dynamo.reset()
    _compare(two_stocks, kind, "aot_eager")


@pytest.mark.slow
def test_the_inductor_compiled_steps_equal_eager(two_stocks):
    torch._dynamo.reset()
    for kind in sorted(MAKERS):
        _compare(two_stocks, kind, "inductor")


def test_the_float64_reference_stays_available_and_is_the_cpu_default(two_stocks):
    assert PortfolioVecEnv(two_stocks, num_envs=2).dtype == torch.float64
    exact = PortfolioVecEnv(two_stocks, PortfolioConfig(random_start=False), num_envs=E, dtype=torch.float64)
    f32 = PortfolioVecEnv(two_stocks, PortfolioConfig(random_start=False), num_envs=E, dtype=torch.float32)
    for a in _actions(exact, 40):
        *_, info_a = exact.step(a)
        *_, info_b = f32.step(a)
        assert info_b["weights"].dtype == torch.float32 and info_b["portfolio_value"].dtype == torch.float64
        rel = ((info_a["portfolio_value"] - info_b["portfolio_value"]) / info_a["portfolio_value"]).abs().max()
        assert float(rel) < 1e-5, float(rel)  # float32 growth factors, float64 value: cents on a million
