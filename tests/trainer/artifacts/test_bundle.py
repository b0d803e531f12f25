"""Agent bundles and checkpoints: round trip, ONNX parity, tampering and truncation."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import onnxruntime as ort
import pytest
import torch

import trainer
from trainer.artifacts.bundle import export_bundle
from trainer.artifacts.bundle_reader import BUNDLE_MEMBERS, load_agent
from trainer.artifacts.checkpoints import load_checkpoint, save_checkpoint
from trainer.artifacts.rebuild import build_agent
from trainer.data.pipeline import load_market_data
from trainer.demo import demo_task_dict
from trainer.errors import BundleError, DataError
from trainer.pod import run_generation
from trainer.task import TaskSpec
from trainer.util.files import sha256_bytes, sha256_file

TICKERS = ["AAPL", "MSFT", "JPM"]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def task() -> TaskSpec:
    d = demo_task_dict()
    d["data"]["tickers"] = TICKERS
    # a larger initial log std and learning rate make a short run move the policy visibly
    d["hyperparameters"] = {
        "num_envs": 32,
        "rollout_steps": 8,
        "num_minibatches": 2,
        "update_epochs": 2,
        "hidden_sizes": [32, 32],
        "learning_rate": 3e-3,
    }
    return TaskSpec.from_dict(d)


@pytest.fixture(scope="module")
def market(task, data_dir, tmp_path_factory):
    return load_market_data(task.data, data_dir=data_dir, cache_dir=tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def checkpoint(task, market, tmp_path_factory):
    out = tmp_path_factory.mktemp("ckpt") / "g1.pt"
    return run_generation(task, env_steps=512, out_path=out, seed=0, device="cpu", market_data=market).checkpoint_path


@pytest.fixture(scope="module")
def bundle(checkpoint, tmp_path_factory):
    path = tmp_path_factory.mktemp("bundle") / "agent.zip"
    digest = export_bundle(checkpoint, path)
    return path, digest


@pytest.fixture(scope="module")
def real_obs(task, market, checkpoint):
    """(253, obs_dim) observations of the validation year, with holdings built by the agent."""
    agent = build_agent(load_checkpoint(checkpoint))
    from trainer.envs.stock_trading import StockTradingVecEnv

    env = StockTradingVecEnv(market.slice(*task.validation), task.env, num_envs=1, seed=0)
    obs, _ = env.reset(options={"start_day": 0})
    rows = [obs]
    for _ in range(env.num_days - 1):
        obs, *_ = env.step(agent.act(obs, deterministic=True) + 0.5)  # +0.5 so it holds shares
        rows.append(obs)
    return torch.cat(rows)


def test_bundle_holds_every_member_with_matching_checksums(bundle):
    path, digest = bundle
    assert sha256_file(path) == digest
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == sorted(BUNDLE_MEMBERS)
        sums = dict(line.split("  ")[::-1] for line in zf.read("SHA256SUMS").decode().splitlines())
        for name in BUNDLE_MEMBERS[:-1]:
            assert sums[name] == sha256_bytes(zf.read(name))
        card = zf.read("README.md").decode()
        assert "Sharpe" in card
        assert "A deep-RL stock-trading policy" in card and "portfolio" not in card.lower()


def test_the_model_card_names_the_bars_the_agent_was_trained_on(bundle, checkpoint):
    from trainer.artifacts.bundle import _model_card

    window = load_checkpoint(checkpoint)["data_window"]
    assert window["periods_per_year"] == 252
    with zipfile.ZipFile(bundle[0]) as zf:
        assert "daily bars" in zf.read("README.md").decode()
    config = load_agent(bundle[0]).config
    five_minute = {**config, "data_window": {**window, "periods_per_year": 78 * 252}}
    card = _model_card(five_minute)
    assert "intraday bars (78 a session)" in card and "daily bars" not in card
    # a checkpoint written before the field: the dates tell
    older = {k: v for k, v in window.items() if k != "periods_per_year"}
    older["train"] = ["2024-03-11 09:35:00", "2024-03-15 16:00:00"]
    assert "intraday bars," in _model_card({**config, "data_window": older})


def test_the_model_card_puts_the_validation_baselines_next_to_the_agents_figures(bundle):
    from trainer.artifacts.bundle import _model_card

    config = load_agent(bundle[0]).config
    metrics = {
        **(config["validation_metrics"] or {}),
        "score": -0.17,
        "selection": {"description": "mean - 1 x std of the Sharpe ratios of 4 validation sub-windows"},
        "untrained": {"score": -0.28, "sharpe_ratio": 0.444},
        "vs_equal_weight": {"baseline_sharpe": 0.4957, "baseline_total_return": 0.1195},
        "vs_QQQ": {"baseline_sharpe": 1.2446, "baseline_total_return": 0.4618},
    }
    card = _model_card({**config, "validation_metrics": metrics})
    assert "untrained policy Sharpe 0.444, score -0.280 (this agent's score -0.170, rule: mean - 1 x std" in card
    assert "1/N rebalanced daily Sharpe 0.496, total return 11.95 %" in card
    assert "QQQ buy and hold Sharpe 1.245, total return 46.18 %" in card
    # the bundle's own validation metrics carry both verdicts against 1/N, with their intervals
    own = config["validation_metrics"]
    card = _model_card(config)
    for key, who in (("vs_equal_weight", "cost-free 1/N"), ("vs_equal_weight_with_costs", "1/N with the task's costs")):
        assert f"- Against {who} on the same validation days: {own[key]['verdict']} (Sharpe difference" in card
    assert "95 % interval" in card and "Ledoit & Wolf 2008" in card
    bare = {k: v for k, v in metrics.items() if k not in ("untrained", "vs_equal_weight", "vs_QQQ")}
    assert "Baselines on the same validation days" not in _model_card({**config, "validation_metrics": bare})


def test_config_describes_observations_tickers_and_normalization(bundle, checkpoint):
    state = load_checkpoint(checkpoint)
    agent = load_agent(bundle[0])
    cfg = agent.config
    assert agent.tickers == tuple(TICKERS)
    assert cfg["indicators"] == list(state["observation_layout"]["feature_names"])
    assert cfg["observation_layout"] == state["observation_layout"]
    # scale-free default: cash and 3 holding fractions, 3 tickers x (4 log returns, volatility, 8 indicators)
    assert cfg["architecture"]["obs_dim"] == 1 + 3 + 3 * 13
    assert cfg["feature_stats"] == state["feature_stats"] and cfg["kind"] == "stock_trading"
    stats = cfg["normalization"]["statistics"]
    np.testing.assert_array_equal(stats["mean"], state["agent"]["obs_rms"]["mean"].numpy())
    assert cfg["env_config"] == state["env_config"]
    assert cfg["data_window"]["train"] == ["2010-01-04", "2019-12-31"]
    assert cfg["hyperparameters"]["hidden_sizes"] == [32, 32]
    assert cfg["paddock_version"] == trainer.__version__
    assert cfg["checkpoint_sha256"] == sha256_file(checkpoint)


def test_loaded_agent_acts_exactly_like_the_trained_agents_deterministic_policy(bundle, checkpoint, real_obs):
    trained = build_agent(load_checkpoint(checkpoint))
    expected = trained.act(real_obs, deterministic=True)
    assert expected.abs().max() > 0.01  # the policy is not trivially zero
    loaded = trainer.load_agent(bundle[0])
    got_numpy = loaded.act(real_obs.numpy())
    assert isinstance(got_numpy, np.ndarray) and got_numpy.dtype == np.float32
    np.testing.assert_array_equal(got_numpy, expected.numpy())
    got_tensor = loaded.act(real_obs)
    assert isinstance(got_tensor, torch.Tensor)
    assert torch.equal(got_tensor, expected)
    # one observation at a time (batch size changes float summation order, hence the 1e-6)
    np.testing.assert_allclose(loaded.act(real_obs[0].numpy()), expected[0].numpy(), atol=1e-6, rtol=0)


def test_onnx_policy_agrees_with_torch_within_1e_5(bundle, real_obs):
    loaded = load_agent(bundle[0])
    with zipfile.ZipFile(bundle[0]) as zf:
        session = ort.InferenceSession(zf.read("policy.onnx"), providers=["CPUExecutionProvider"])
    onnx_actions = session.run(["action"], {"obs": real_obs.numpy()})[0]
    np.testing.assert_allclose(onnx_actions, loaded.act(real_obs.numpy()), atol=1e-5, rtol=0)
    single = session.run(["action"], {"obs": real_obs[:1].numpy()})[0]  # the batch axis is dynamic
    assert single.shape == (1, 3)


def test_exporting_the_same_checkpoint_twice_gives_the_same_zip(bundle, checkpoint, tmp_path):
    assert export_bundle(checkpoint, tmp_path / "again.zip") == bundle[1]


def _rewrite(src, dst, change):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            data = change(name, zin.read(name))
            if data is not None:
                zout.writestr(name, data)


def test_tampered_weights_are_refused_naming_the_member(bundle, tmp_path):
    bad = tmp_path / "tampered.zip"

    def flip(name, data):
        if name != "policy.safetensors":
            return data
        arr = bytearray(data)
        arr[-1] ^= 0x01
        return bytes(arr)

    _rewrite(bundle[0], bad, flip)
    with pytest.raises(BundleError) as info:
        load_agent(bad)
    assert "policy.safetensors" in info.value.message
    assert info.value.details == {"file": str(bad), "member": "policy.safetensors"}


def test_truncated_bundle_is_refused_naming_the_file(bundle, tmp_path):
    bad = tmp_path / "truncated.zip"
    data = bundle[0].read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(BundleError) as info:
        load_agent(bad)
    assert str(bad) in info.value.message
    assert info.value.details["file"] == str(bad)


def test_bundle_missing_a_member_is_refused_naming_it(bundle, tmp_path):
    bad = tmp_path / "partial.zip"
    _rewrite(bundle[0], bad, lambda name, data: None if name == "config.json" else data)
    with pytest.raises(BundleError) as info:
        load_agent(bad)
    assert "config.json is missing" in info.value.message


def test_loaded_agent_runs_over_the_test_dates(bundle, task, market):
    loaded = load_agent(bundle[0])
    test = market.slice(*task.test, name="test")
    env = loaded.make_env(test)
    obs, info = env.reset(options={"start_day": 0})
    policy = loaded.backtest_policy()
    obs, reward, terminated, truncated, info = env.step(policy(obs))
    assert obs.shape == (1, loaded.obs_dim)
    metrics = loaded.evaluate(test, random_windows=0)
    assert metrics["start"] == "2021-01-05" and metrics["end"] == "2022-11-15"
    assert metrics["num_days"] == test.num_days - 1


def test_loaded_agent_refuses_market_data_with_other_tickers(bundle, market):
    loaded = load_agent(bundle[0])
    from trainer.data.market import MarketData

    fewer = MarketData(
        dates=market.dates,
        tickers=("AAPL", "MSFT"),
        close=market.close[:, :2],
        features=market.features[:, :2],
        feature_names=market.feature_names,
        turbulence=market.turbulence,
    )
    with pytest.raises(DataError) as info:
        loaded.make_env(fewer)
    assert "JPM" in info.value.message


def test_observations_of_the_wrong_width_are_a_data_error(bundle):
    with pytest.raises(DataError):
        load_agent(bundle[0]).act(np.zeros((2, 5), dtype=np.float32))


class _NotAllowed:
    """A class that weights_only loading must refuse to unpickle."""


def test_checkpoint_loading_never_unpickles_arbitrary_objects(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": "paddock.checkpoint", "payload": _NotAllowed()}, path)
    with pytest.raises(BundleError) as info:
        load_checkpoint(path)
    assert info.value.details["file"] == str(path)
    with pytest.raises(BundleError):
        save_checkpoint({"payload": _NotAllowed()}, tmp_path / "never.pt")
    assert not (tmp_path / "never.pt").exists()


def test_a_bundle_or_a_text_file_given_as_a_checkpoint_says_what_it_is(bundle, tmp_path):
    with pytest.raises(BundleError) as info:
        load_checkpoint(bundle[0])
    assert "is an agent bundle, not a checkpoint" in info.value.message
    text = tmp_path / "README.md"
    text.write_text("# not a checkpoint\n")
    with pytest.raises(BundleError) as info:
        load_checkpoint(text)
    # one line of our own: never torch's advice to load with weights_only=False
    assert "is not a Paddock checkpoint" in info.value.message
    assert "weights_only" not in info.value.message and "\n" not in info.value.message


def test_truncated_or_altered_checkpoints_are_refused(checkpoint, tmp_path):
    data = checkpoint.read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(BundleError):
        load_checkpoint(cut)
    with pytest.raises(BundleError) as info:
        load_checkpoint(checkpoint, expected_sha256="0" * 64)
    assert "SHA-256" in info.value.message


def test_bundle_config_is_plain_json(bundle):
    with zipfile.ZipFile(bundle[0]) as zf:
        json.load(io.BytesIO(zf.read("config.json")))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_loaded_agent_acts_on_gpu_tensors(bundle, real_obs):
    loaded = load_agent(bundle[0])
    on_gpu = loaded.act(real_obs.cuda())
    assert on_gpu.is_cuda
    np.testing.assert_allclose(on_gpu.cpu().numpy(), loaded.act(real_obs.numpy()), atol=1e-5)
