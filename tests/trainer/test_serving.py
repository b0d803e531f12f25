"""Policy serving without Django: ONNX answers equal load_agent's, market states, errors, cache, HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from trainer.artifacts.bundle_reader import load_agent
from trainer.cli.main import main
from trainer.data.loading import load_panel
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.errors import DataError
from trainer.serving.answers import answer
from trainer.serving.bodies import BARS_MIN_DAYS, BARS_TOLERANCE, min_bars_days, min_history_days
from trainer.serving.policy import PolicyCache, ServedPolicy
from trainer.serving.server import make_server

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "--tickers", "AAPL,MSFT,JPM",
    "--env-steps", "256",
    "--num-envs", "16",
    "--hp", "rollout_steps=8",
    "--hp", "num_minibatches=2",
    "--hp", "hidden_sizes=[16, 16]",
]  # fmt: skip
DAY = "2021-06-01"  # a trading day of the test split


@pytest.fixture(scope="module")
def trained(data_dir, tmp_path_factory) -> dict:
    """Two tiny PPO bundles trained on three Dow tickers (different seeds)."""
    torch.set_num_threads(1)
    out = {}
    for seed in (0, 1):
        folder = tmp_path_factory.mktemp(f"bundle{seed}")
        args = ["train", "--data-dir", str(data_dir), "--out", str(folder), "--seed", str(seed), *TINY]
        assert main(args) == 0
        out[seed] = next(folder.glob("*.zip"))
    return out


@pytest.fixture(scope="module")
def policy(trained) -> ServedPolicy:
    return ServedPolicy.load(trained[0])


@pytest.fixture(scope="module")
def market(policy, data_dir):
    return load_market_data(DataSpec.from_dict(policy.config["task"]["data"]), data_dir=data_dir)


def _bars(market, end_index: int, days: int) -> dict:
    """Flat bars (open = high = low = close) of the panel's last ``days`` days up to ``end_index``."""
    bars = {}
    for n, t in enumerate(market.tickers):
        rows = []
        for i in range(end_index - days + 1, end_index + 1):
            c = float(market.close[i, n])
            rows.append({"date": str(market.dates[i])[:10], "open": c, "high": c, "low": c, "close": c, "volume": 1e6})
        bars[t] = rows
    return bars


def test_observation_batches_answer_the_same_actions_as_load_agent(policy, trained):
    loaded = load_agent(trained[0])
    obs = np.random.default_rng(0).normal(size=(256, policy.obs_dim)).astype(np.float32) * 3
    out = answer(policy, {"observations": obs.tolist()})
    assert out["algorithm"] == "ppo"
    np.testing.assert_allclose(np.array(out["actions"]), loaded.act(obs), atol=1e-5)
    single = answer(policy, {"observations": obs[:1].tolist()})
    np.testing.assert_allclose(np.array(single["actions"]), loaded.act(obs[:1]), atol=1e-5)


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"observations": [[0.0] * 3]}, "observations", "observations[0] has 3 values"),
        ({"observations": []}, "observations", "non-empty"),
        ({"observations": [["x"] * 200]}, "observations", None),
        ({}, "observations", "exactly one of"),
        ({"date": "2021-06-01", "bars": {}}, "bars", "exactly one of"),
        ({"date": "2021-13-01"}, "date", "not a calendar date"),
        ({"date": "2021-06-05"}, "date", "not a trading day"),  # a Saturday
        ({"date": DAY, "cash": -5}, "cash", ">= 0"),
        ({"date": DAY, "holdings": {"TSLA": 3}}, "holdings", "TSLA"),
        ({"date": DAY, "holdings": {"AAPL": 1.5}}, "holdings.AAPL", "whole number"),
        ({"bars": {"AAPL": []}}, "bars", "missing MSFT, JPM"),
    ],
)
def test_bad_requests_raise_data_errors_naming_the_field(policy, market, body, field, words):
    with pytest.raises(DataError) as err:
        answer(policy, body, load_market=lambda: market)
    assert err.value.details["field"].startswith(field)
    if words:
        assert words in err.value.message


def test_a_wrong_row_length_names_the_row(policy):
    rows = [[0.0] * policy.obs_dim, [0.0] * (policy.obs_dim + 1)]
    with pytest.raises(DataError) as err:
        answer(policy, {"observations": rows})
    assert "observations[1]" in err.value.message and str(policy.obs_dim) in err.value.message


def test_a_dataset_day_builds_the_envs_observation_and_its_orders(policy, trained, market):
    loaded = load_agent(trained[0])
    out = answer(policy, {"date": DAY}, load_market=lambda: market)
    # the env started on that day with the initial cash and no shares observes exactly this
    env = loaded.make_env(loaded.prepare_market(market).slice(DAY, None))  # lookbacks reach before DAY
    obs, _ = env.reset(seed=0)
    np.testing.assert_allclose(np.array(out["observation"]), obs[0].numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.array(out["action"]), loaded.act(obs[0].numpy()), atol=1e-5)
    assert out["date"] == DAY and set(out["prices"]) == {"AAPL", "MSFT", "JPM"}
    hmax = policy.config["env_config"]["hmax"]
    for order in out["orders"]:
        assert order["shares"] >= 0  # no shares to sell yet
        assert order["shares"] == max(0, int(np.trunc(np.float32(order["action"]) * np.float32(hmax))))
        assert order["price"] == out["prices"][order["ticker"]]


def test_sells_are_capped_by_holdings_and_buys_by_cash(policy, market):
    out = answer(policy, {"date": DAY, "cash": 0.0, "holdings": {"AAPL": 2}}, load_market=lambda: market)
    for order in out["orders"]:
        assert order["shares"] <= 0  # no cash: nothing bought
        assert order["shares"] >= -(2 if order["ticker"] == "AAPL" else 0)
    assert out["holdings"] == {"AAPL": 2.0, "MSFT": 0.0, "JPM": 0.0}


def test_a_stock_agent_over_a_point_in_time_universe_sells_a_non_member_and_never_buys_it(policy, market):
    import dataclasses

    members = np.ones(market.close.shape, dtype=bool)
    members[:, market.tickers.index("MSFT")] = False
    universe = dataclasses.replace(market, members=members)
    body = {"date": DAY, "cash": 1e6, "holdings": {"MSFT": 5}}
    orders = {o["ticker"]: o["shares"] for o in answer(policy, body, load_market=lambda: universe)["orders"]}
    assert orders["MSFT"] == -5, "its shares are sold at the close"
    plain = {o["ticker"]: o["shares"] for o in answer(policy, body, load_market=lambda: market)["orders"]}
    assert plain["MSFT"] != -5, "without the universe this agent keeps (some of) them"
    assert {t: q for t, q in orders.items() if t != "MSFT"} == {t: q for t, q in plain.items() if t != "MSFT"}


def _real_bars(policy, data_dir, day: str, days: int) -> dict:
    """The data file's own last ``days`` daily bars of every ticker up to ``day``."""
    spec = DataSpec.from_dict(policy.config["task"]["data"])
    panel = load_panel([data_dir / p for p in spec.paths], tickers=policy.tickers)
    bars = {}
    for t in policy.tickers:
        rows = panel[(panel["tic"] == t) & (panel["date"] <= day)].tail(days)
        assert len(rows) == days
        bars[t] = [
            {
                "date": str(r.date)[:10],
                "open": r.open,
                "high": r.high,
                "low": r.low,
                "close": r.close,
                "volume": r.volume,
            }
            for r in rows.itertuples()
        ]
    return bars


def _need(policy) -> int:
    from trainer.data.indicators import DEFAULT_INDICATORS

    raw = policy.config["task"]["data"].get("indicators") or DEFAULT_INDICATORS
    return min_bars_days(list(raw), scale_free=policy.config["env_config"].get("observation") == "scale_free")


@pytest.mark.parametrize("day", ["2012-06-01", "2020-03-20", DAY, "2022-11-15"])
def test_the_fewest_bars_accepted_build_the_dataset_days_observation_within_the_tolerance(
    policy, market, data_dir, day
):
    """At exactly the minimum history (252 real daily bars) the bars path gives the ``date``
    path's observation within BARS_TOLERANCE (EMA indicators converged); 64 days did not."""
    need = _need(policy)
    assert need == BARS_MIN_DAYS == 252 and BARS_TOLERANCE == 1e-3
    full = answer(policy, {"date": day, "holdings": {"MSFT": 7}}, load_market=lambda: market)
    out = answer(policy, {"bars": _real_bars(policy, data_dir, day, need), "holdings": {"MSFT": 7}})
    assert out["date"] == day and "warnings" not in out
    a, b = np.array(out["observation"]), np.array(full["observation"])
    n = len(policy.tickers)
    np.testing.assert_allclose(a[: 1 + 2 * n], b[: 1 + 2 * n], rtol=1e-6)  # cash, close, holdings
    assert np.abs(a - b).max() < BARS_TOLERANCE  # z-scored features
    np.testing.assert_allclose(out["action"], full["action"], atol=BARS_TOLERANCE)
    # the old minimum (64 days) was accepted and differed by far more: the reason for 252
    with pytest.raises(DataError):
        answer(policy, {"bars": _real_bars(policy, data_dir, day, 64)})


def test_too_few_bars_is_a_400_naming_the_ticker(policy, market):
    need = _need(policy)
    t = [str(d)[:10] for d in market.dates].index(DAY)
    with pytest.raises(DataError) as err:
        answer(policy, {"bars": _bars(market, t, need - 1)})
    assert err.value.details["field"] == "bars.AAPL" and f"at least {need} days" in err.value.message
    assert "1e-03" in err.value.message or "0.001" in err.value.message


def test_a_warm_up_day_of_the_train_split_answers_with_a_warning(policy, market):
    """2010-01-05 is the dataset's second day: its 63-day features use 2 days. The train split
    starts on the dataset's first day, so the agent trained on such rows: served, with a warning."""
    out = answer(policy, {"date": "2010-01-05"}, load_market=lambda: market)
    assert out["date"] == "2010-01-05" and len(out["warnings"]) == 1
    warning = out["warnings"][0]
    assert "2 trading days of history" in warning and f"first day with full history is {market.dates[63]}" in warning
    assert "warnings" not in answer(policy, {"date": str(market.dates[63])}, load_market=lambda: market)
    assert "warnings" in answer(policy, {"date": str(market.dates[62])}, load_market=lambda: market)


def test_a_warm_up_day_outside_the_train_split_is_refused_naming_date(policy, market):
    import copy
    import dataclasses

    config = copy.deepcopy(policy.config)
    config["task"]["train"]["start"] = "2011-01-01"  # the first 63 days are history only
    later = dataclasses.replace(policy, config=config, prepared=None)
    with pytest.raises(DataError) as err:
        answer(later, {"date": "2010-01-05"}, load_market=lambda: market)
    assert err.value.details["field"] == "date"
    assert f"first day that can be served is {market.dates[63]}" in err.value.message


def test_min_history_days_reads_indicator_windows():
    assert min_history_days(["macd", "rsi_30", "close_60_sma"]) == 61
    assert min_history_days(["macd", "boll_ub"]) == 36
    assert min_history_days(["macd", "boll_ub"], scale_free=True) == 64  # the 63-day log return


def test_cash_and_holdings_worth_nothing_is_a_400(policy, market):
    with pytest.raises(DataError) as err:
        answer(policy, {"date": DAY, "cash": 0}, load_market=lambda: market)
    assert err.value.details["field"] == "cash"


def test_the_cache_is_bounded_and_reloads_a_changed_bundle(trained, tmp_path):
    cache = PolicyCache(capacity=1)
    path = tmp_path / "agent.zip"
    shutil.copy(trained[0], path)
    first = cache.get("a", path)
    assert cache.get("a", path) is first and cache.loads == 1
    cache.get("b", trained[1])
    assert len(cache) == 1 and "a" not in cache  # least recently used evicted
    obs = np.ones((1, first.obs_dim), dtype=np.float32)
    before = cache.get("a", path).act(obs)
    time.sleep(0.01)
    shutil.copy(trained[1], path)  # a new bundle under the same name
    after = cache.get("a", path)
    assert cache.loads == 4
    np.testing.assert_allclose(after.act(obs), load_agent(trained[1]).act(obs), atol=1e-5)
    assert not np.allclose(before, after.act(obs))


def _post(url: str, body: object) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_standalone_server_answers_like_answer_and_400s_bad_bodies(trained, data_dir, policy):
    server = make_server(trained[0], port=0, data_dir=data_dir)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        obs = np.zeros((2, policy.obs_dim), dtype=np.float32).tolist()
        status, out = _post(f"{base}/act", {"observations": obs})
        assert status == 200 and out == answer(policy, {"observations": obs})
        status, out = _post(f"{base}/api/agents/7/act", {"date": DAY})
        assert status == 200 and out["date"] == DAY and len(out["orders"]) == 3
        status, out = _post(f"{base}/act", {"observations": [[1.0]]})
        assert status == 400 and "observations" in out["fields"]
        status, out = _post(f"{base}/act", b"{not json")
        assert status == 400 and out["fields"] == {"body": "not valid JSON"}
        with urllib.request.urlopen(f"{base}/healthz", timeout=30) as resp:
            health = json.loads(resp.read())
        assert health["tickers"] == ["AAPL", "MSFT", "JPM"] and health["obs_dim"] == policy.obs_dim
    finally:
        server.shutdown()
        server.server_close()


def test_python_m_trainer_serve_runs_the_endpoint_and_a_missing_bundle_exits_2(trained, tmp_path, policy):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer", "serve", str(trained[0]), "--port", "0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving "), proc.stderr.read() if proc.poll() is not None else line
        url = line.split(" on ")[1].split(" ")[0]
        status, out = _post(url, {"observations": np.zeros((1, policy.obs_dim)).tolist()})
        assert status == 200 and len(out["actions"][0]) == 3
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    missing = subprocess.run(
        [sys.executable, "-m", "trainer", "serve", str(tmp_path / "nope.zip")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert missing.returncode == 2 and missing.stderr.startswith("error: bundle ") and "Traceback" not in missing.stderr


def _raw_post(port: int, length: str, body: bytes = b"") -> tuple[int, dict]:
    """POST /act with a hand-written ``Content-Length``; the status and JSON of the answer."""
    import http.client
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = f"POST /act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
        sock.sendall(head.encode() + body)
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        return resp.status, json.loads(resp.read())


@pytest.mark.parametrize(
    ("length", "status", "words"),
    [
        ("99999999999", 413, "more than 1,024 bytes"),
        ("abc", 400, "not a whole number"),
        ("-5", 400, "not a whole number"),
        ("2048", 413, "2,048 bytes"),
    ],
)
def test_a_bad_or_oversize_content_length_is_answered_400_or_413_json(trained, length, status, words):
    from trainer.limits import InputLimits

    server = make_server(trained[0], port=0, limits=InputLimits(request_bytes=1024))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        code, out = _raw_post(port, length)
        assert code == status and words in out["error"] and "body" in out["fields"]
        # the server still answers the next client
        code, out = _raw_post(port, "4", b"null")
        assert code == 400 and "fields" in out
    finally:
        server.shutdown()
        server.server_close()
