"""Act requests whose numbers a float cannot hold, or that are not numbers (booleans), and the
standalone server's answers to them and to bodies it cannot decode: always a 400 naming the
field (a 500 in the error format for a genuine internal error), never a dropped connection,
never a traceback."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainer.test_serving import TINY
from trainer.cli.main import main
from trainer.data.pipeline import load_market_data
from trainer.data.spec import DataSpec
from trainer.errors import DataError
from trainer.serving.answers import answer, checked_actions, finite_answer
from trainer.serving.policy import ServedPolicy
from trainer.serving.server import make_server
from trainer.util.files import sha256_bytes

REPO = Path(__file__).resolve().parents[2]
DAY = "2021-06-01"  # a trading day of the test split (AAPL closed near 124 USD)
HUGE_INT = 10**400  # a JSON integer no float holds
KINDS = {
    "stock": [],
    "finrl": ["--observation", "finrl"],  # cash, prices and holdings in the observation as raw amounts
    "portfolio": ["--env", "portfolio", "--algo", "ppo", "--rebalance-band", "0.01"],
}


@pytest.fixture(scope="module")
def bundles(data_dir, tmp_path_factory) -> dict[str, Path]:
    """Tiny PPO bundles on three Dow tickers: a stock-trading agent (scale-free observation),
    one with FinRL's raw observation and a portfolio agent."""
    torch.set_num_threads(1)
    out = {}
    for kind, flags in KINDS.items():
        folder = tmp_path_factory.mktemp(f"bundle-{kind}")
        assert main(["train", "--data-dir", str(data_dir), "--out", str(folder), "--seed", "0", *flags, *TINY]) == 0
        out[kind] = next(folder.glob("*.zip"))
    return out


@pytest.fixture(scope="module")
def policies(bundles) -> dict[str, ServedPolicy]:
    return {kind: ServedPolicy.load(path) for kind, path in bundles.items()}


@pytest.fixture(scope="module")
def market(policies, data_dir):
    return load_market_data(DataSpec.from_dict(policies["stock"].config["task"]["data"]), data_dir=data_dir)


def _obs(n: int, at: int, value: object) -> list[list[object]]:
    row: list[object] = [0.0] * n
    row[at] = value
    return [row]


def _bars(close: object) -> dict:
    bar = {"date": DAY, "open": 1.0, "high": 1.0, "low": 1.0, "close": close, "volume": 1.0}
    return {t: [bar] * 300 for t in ("AAPL", "MSFT", "JPM")}


@pytest.mark.parametrize("kind", ["stock", "portfolio"])
@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        # one position alone is worth more than a float holds
        ({"date": DAY, "cash": 1e308, "holdings": {"AAPL": 1e308}}, "holdings.AAPL", "worth more than the largest"),
        # each is finite, the sum is not
        ({"date": DAY, "cash": 1.5e308, "holdings": {"AAPL": 1e306}}, "cash", "value the portfolio beyond the largest"),
        ({"date": DAY, "cash": HUGE_INT}, "cash", "got a 401-digit number"),
        ({"date": DAY, "cash": True}, "cash", "got the boolean true"),
        ({"date": DAY, "holdings": {"MSFT": False}}, "holdings.MSFT", "got the boolean false"),
        ({"bars": _bars(True)}, "bars.AAPL[0].close", "got the boolean true"),
    ],
)
def test_a_portfolio_no_float_holds_or_a_boolean_amount_is_refused_naming_the_field(
    policies, market, kind, body, field, words
):
    with pytest.raises(DataError) as err:
        answer(policies[kind], body, load_market=lambda: market)
    assert err.value.details["field"] == field
    assert words in err.value.message


def test_a_boolean_weight_is_refused_naming_it(policies, market):
    with pytest.raises(DataError) as err:
        answer(policies["portfolio"], {"date": DAY, "weights": {"AAPL": True}}, load_market=lambda: market)
    assert err.value.details["field"] == "weights.AAPL" and "boolean" in err.value.message


@pytest.mark.parametrize(
    ("at", "value", "words"),
    [
        (3, 1e300, "beyond the range of the float32 values the policy reads"),
        (3, -3.5e38, "beyond the range of the float32"),
        (0, True, "got the boolean true"),
        (5, False, "got the boolean false"),
        (1, HUGE_INT, "got a 401-digit number"),
    ],
)
def test_an_observation_value_that_is_no_float32_or_a_boolean_is_refused_naming_it(policies, at, value, words):
    policy = policies["stock"]
    with pytest.raises(DataError) as err:
        answer(policy, {"observations": [[0.0] * policy.obs_dim, *_obs(policy.obs_dim, at, value)]})
    assert err.value.details["field"] == f"observations[1][{at}]"
    assert words in err.value.message


def test_the_largest_float32_observation_is_still_answered(policies):
    policy = policies["stock"]
    out = answer(policy, {"observations": _obs(policy.obs_dim, 3, float(np.finfo(np.float32).max))})
    assert all(math.isfinite(a) for a in out["actions"][0])


@pytest.mark.parametrize(
    ("body", "field"), [({"cash": 1e300}, "cash"), ({"holdings": {"MSFT": 1e300}}, "holdings.MSFT")]
)
def test_an_amount_beyond_float32_in_a_raw_observation_is_refused_naming_it(policies, market, body, field):
    """FinRL's layout feeds cash and shares to the policy as scaled amounts: 1e300 USD is a
    finite value but no float32 observation; the answer's check names the block's field."""
    policy = policies["finrl"]
    assert policy.config["observation_layout"].get("observation") != "scale_free"
    with pytest.raises(DataError) as err:
        answer(policy, {"date": DAY, **body}, load_market=lambda: market)
    assert err.value.details["field"] == field
    assert "the policy's answer is not finite for these values (observation[" in err.value.message
    fine = answer(policy, {"date": DAY, "cash": 1e6, "holdings": {"MSFT": 10}}, load_market=lambda: market)
    assert fine["cash"] == 1e6


def test_the_answers_last_check_names_the_field_of_a_non_finite_number(policies):
    policy = policies["portfolio"]
    out = {"date": DAY, "orders": [{"value": 1.0}, {"value": math.inf}], "observation": [0.0, 0.5]}
    assert finite_answer(policy, {"bars": {}}, "bars", {**out, "orders": []}) == {**out, "orders": []}
    for body, field in (({"bars": {}}, "bars"), ({"date": DAY, "cash": 5.0}, "cash")):
        with pytest.raises(DataError) as err:
            finite_answer(policy, body, next(iter(body)), out)
        assert err.value.details["field"] == field and "(orders[1].value would be inf)" in err.value.message


def test_non_finite_actions_of_a_batch_are_refused_naming_the_rows():
    actions = np.array([[0.1, 0.2], [np.nan, 0.0], [0.3, 0.4], [0.0, -np.inf]], dtype=np.float32)
    with pytest.raises(DataError) as err:
        checked_actions(actions)
    assert err.value.details == {"field": "observations", "row": 1}
    assert "not finite for these values (observations[1], observations[3])" in err.value.message
    assert checked_actions(actions[[0, 2]]) is not None


def _post(port: int, data: bytes) -> tuple[int, dict]:
    """POST /act on a fresh connection; the status and the JSON answer (a dropped connection raises)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/act", body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(bundles, data_dir):
    """The stock-trading agent's ``trainer serve`` server, in a thread."""
    srv = make_server(bundles["stock"], port=0, data_dir=data_dir)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (json.dumps({"date": DAY, "cash": 1e308, "holdings": {"AAPL": 1e308}}).encode(), "holdings.AAPL", "largest"),
        (json.dumps({"date": DAY, "cash": 1.5e308, "holdings": {"AAPL": 1e306}}).encode(), "cash", "largest float"),
        (json.dumps({"observations": _obs(43, 3, 1e300)}).encode(), "observations[0][3]", "float32"),
        (json.dumps({"observations": _obs(43, 0, True)}).encode(), "observations[0][0]", "boolean"),
        (json.dumps({"date": DAY, "holdings": {"JPM": True}}).encode(), "holdings.JPM", "boolean"),
        (_deep(100_000), "body", "JSON nested deeper than 32 levels"),
        (_deep(33), "body", "JSON nested deeper than 32 levels"),
        (_deep(32), "body", "must be a JSON object"),  # the deepest allowed: refused for what it is
        (b'{"observations": [[' + b"9" * 5000 + b"]]}", "body", "not valid JSON"),
        (b'{"observations": [[' + b"9" * 400 + b", 0" * 42 + b"]]}", "observations[0][0]", "400-digit"),
    ],
)
def test_the_server_answers_400_naming_the_field_never_drops_the_connection(server, policies, data, field, words):
    assert policies["stock"].obs_dim == 43
    status, out = _post(server, data)
    assert status == 400, out
    assert list(out["fields"]) == [field] and words in out["error"]
    status, out = _post(server, json.dumps({"observations": _obs(43, 0, 1.0)}).encode())
    assert status == 200 and len(out["actions"][0]) == 3  # and it goes on answering


@pytest.mark.parametrize(
    ("data", "token", "where"),
    [
        (b'{"observations": [[NaN' + b", 0.0" * 42 + b"]]}", "NaN", "line 1 column 20 (char 19)"),
        (b'{"date": "' + DAY.encode() + b'", "cash": Infinity}', "Infinity", "line 1 column 32 (char 31)"),
        (
            b'{"date": "' + DAY.encode() + b'",\n "holdings": {"AAPL": -Infinity}}',
            "-Infinity",
            "line 2 column 23 (char 45)",
        ),
        # a string holding the word comes first: it is no number, the token after it is
        (b'{"date": "NaN Infinity", "cash": NaN}', "NaN", "line 1 column 34 (char 33)"),
    ],
)
def test_a_non_standard_json_number_is_refused_as_the_body_is_read_naming_the_token(server, data, token, where):
    """Python's ``json`` reads ``NaN`` and ``Infinity``; the server used to let them through and
    refuse them field by field later, each in its own words."""
    status, out = _post(server, data)
    assert status == 400, out
    assert out == {
        "error": f"the body is not valid JSON: it holds {token} at {where}, a non-standard JSON number (JSON numbers "
        "are finite); send finite numbers",
        "fields": {"body": f"not valid JSON: {token} is a non-standard JSON number"},
    }


def test_a_string_that_spells_nan_is_still_a_string(server):
    status, out = _post(server, b'{"date": "NaN"}')
    assert status == 400 and list(out["fields"]) == ["date"]  # read as JSON, then refused as a day


def _without_task(bundle: Path, out: Path) -> Path:
    """A copy of ``bundle`` whose config lacks its task (checksums updated): it loads, but a
    ``date`` request cannot find the agent's data, an error the server did not foresee."""
    with zipfile.ZipFile(bundle) as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    config = json.loads(members["config.json"])
    del config["task"]
    members["config.json"] = json.dumps(config).encode()
    members["SHA256SUMS"] = "".join(
        f"{sha256_bytes(data)}  {name}\n" for name, data in members.items() if name != "SHA256SUMS"
    ).encode()
    with zipfile.ZipFile(out, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out


def test_python_m_trainer_serve_answers_an_internal_error_500_in_its_format_without_a_traceback(
    bundles, data_dir, tmp_path
):
    bundle = _without_task(bundles["stock"], tmp_path / "no-task.zip")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainer", "serve", str(bundle), "--port", "0", "--data-dir", str(data_dir)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving "), proc.stderr.read() if proc.poll() is not None else line
        port = int(line.split(" on ")[1].split("/act")[0].rsplit(":", 1)[1])
        status, out = _post(port, json.dumps({"date": DAY}).encode())
        assert status == 500 and out == {
            "error": "internal error (KeyError); the server's log has a line about it",
            "fields": {},
        }
        status, out = _post(port, _deep(100_000))
        assert status == 400 and out["fields"] == {"body": "JSON nested deeper than 32 levels"}
        status, out = _post(port, json.dumps({"observations": _obs(43, 3, 1e300)}).encode())
        assert status == 400 and list(out["fields"]) == ["observations[0][3]"]
        status, out = _post(port, json.dumps({"observations": _obs(43, 0, 1.0)}).encode())
        assert status == 200
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert "Traceback" not in stderr
    assert stderr.splitlines() == ["error: POST /act: internal error: KeyError('task')"]
