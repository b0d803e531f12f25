"""Serve a bundle's policy: ONNX inference, observations from market states, one request format.

The request path runs no torch code: actions come from the bundle's ``policy.onnx`` through
onnxruntime (:class:`ServedPolicy`), observations are built with NumPy from the bundle's
observation layout (:func:`trainer.envs.stock_trading.build_observation`) and indicators with
the same pipeline that trained the agent (:func:`trainer.data.build_market_data`). The Django
endpoint ``POST /api/agents/{id}/act`` and ``python -m trainer serve BUNDLE.zip`` both call
:func:`answer`, so they give the same JSON for the same body.

Request bodies (JSON objects), one of:

* ``{"observations": [[...], ...]}``: a batch (B, obs_dim) of raw observations built as the
  bundle's ``observation_layout`` says; answers ``actions`` (B, action_dim).
* ``{"date": "YYYY-MM-DD"}``: the state of a trading day of the agent's dataset (the same data
  files the task trained on); optional ``cash`` (USD) and ``holdings`` (``{ticker: shares}``),
  default the env's initial cash and no shares.
* ``{"bars": {ticker: [{"date", "open", "high", "low", "close", "volume"}, ...]}}``: recent
  daily bars of every ticker of the agent, oldest first, ending on the day to act on, with at
  least :func:`min_history_days` days; optional ``cash`` and ``holdings`` as above.

A market state answers ``action`` (action_dim,), ``orders`` (one per ticker: ``shares`` signed,
``side``, ``price``, ``value``) computed with the env's trade rule (sells capped by holdings,
buys scaled to the cash), ``prices``, ``date``, ``cash``, ``holdings`` and the ``observation``
it built. Bad input raises :class:`~trainer.errors.DataError` naming the field
(``observations``, ``date``, ``bars.AAPL[3].close``, ``holdings.MSFT``...).

Market states are served for the stock-trading env (``kind == "stock_trading"``); agents of
other kinds answer observation batches only.
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import BundleError, DataError, TrainerError

__all__ = [
    "MAX_BATCH",
    "PolicyCache",
    "ServedPolicy",
    "answer",
    "make_server",
    "min_history_days",
]

#: Most observations in one request (a 256-row batch is the benchmarked size).
MAX_BATCH = 4_096
#: Most bars per ticker in one request (about 8 years of trading days).
MAX_BARS = 2_048


@dataclass
class ServedPolicy:
    """A bundle's ONNX policy in an onnxruntime session, with the config needed to feed it.

    Attributes:
        path: the bundle zip.
        signature: ``(size, mtime_ns, inode)`` of the zip when it was loaded (a changed bundle
            is reloaded by :class:`PolicyCache`).
        config: the bundle's ``config.json``.
        session: ``onnxruntime.InferenceSession`` of ``policy.onnx`` (input ``obs`` (B,
            obs_dim) float32, output ``action`` (B, action_dim) float32).
    """

    path: Path
    signature: tuple[int, int, int]
    config: dict[str, Any]
    session: Any
    #: ``(raw MarketData, the panel the env reads)`` of the last dataset used (see :func:`_env_panel`)
    prepared: Any = None

    @classmethod
    def load(cls, path: str | Path, *, threads: int = 1) -> ServedPolicy:
        """Open a bundle, verify every checksum and start an onnxruntime session on the CPU.

        Args:
            path: bundle zip written by :func:`trainer.bundle.export_bundle`.
            threads: onnxruntime intra-op threads (1: requests are small; parallelism comes
                from serving several requests at once).

        Raises:
            BundleError: missing, truncated or tampered bundle, or an ONNX graph onnxruntime
                cannot load.
        """
        import onnxruntime as ort

        from trainer.bundle_reader import read_bundle

        path = Path(path)
        signature = _signature(path)
        members = read_bundle(path)
        config = json.loads(members["config.json"].decode("utf-8"))
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(members["policy.onnx"], options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types
            raise BundleError(
                f"bundle {path}: policy.onnx cannot be loaded by onnxruntime ({exc})",
                file=str(path),
                member="policy.onnx",
            ) from exc
        return cls(path, signature, config, session)

    @property
    def obs_dim(self) -> int:
        return int(self.config["architecture"]["obs_dim"])

    @property
    def action_dim(self) -> int:
        return int(self.config["architecture"]["action_dim"])

    @property
    def tickers(self) -> list[str]:
        return list(self.config["tickers"])

    @property
    def kind(self) -> str:
        return str((self.config.get("task") or {}).get("kind", "stock_trading"))

    def act(self, observations: np.ndarray) -> np.ndarray:
        """Deterministic actions (B, action_dim) float32 in [-1, 1] for (B, obs_dim) float32 observations."""
        return self.session.run(None, {"obs": np.ascontiguousarray(observations, dtype=np.float32)})[0]


def _signature(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BundleError(f"bundle {path} does not exist", file=str(path)) from exc
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class PolicyCache:
    """At most ``capacity`` loaded policies, least recently used evicted first; thread-safe.

    A policy is reloaded when its bundle file changed (size, mtime or inode) since it was
    loaded, or when it is asked for under another path.

    Args:
        capacity: sessions kept, >= 1 (each holds the policy's weights: ~100 kB for 64x64 MLPs).
        threads: onnxruntime intra-op threads of each session.
    """

    def __init__(self, capacity: int = 32, *, threads: int = 1) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity, self.threads = capacity, threads
        self._items: OrderedDict[Any, ServedPolicy] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0  # sessions created (a test and the benchmark read it)

    def get(self, key: Any, path: str | Path) -> ServedPolicy:
        """The policy of ``key`` (e.g. an agent id) whose bundle is ``path``, loading it if needed.

        Raises:
            BundleError: as :meth:`ServedPolicy.load`.
        """
        path = Path(path)
        with self._lock:
            policy = self._items.get(key)
            if policy is not None and policy.path == path and policy.signature == _signature(path):
                self._items.move_to_end(key)
                return policy
        policy = ServedPolicy.load(path, threads=self.threads)
        with self._lock:
            self.loads += 1
            self._items[key] = policy
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return policy

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Any) -> bool:
        return key in self._items


# ---------------------------------------------------------------------------- request parsing
def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DataError(f"{field} must be a finite number, got {value!r}", field=field)
    return float(value)


def parse_observations(value: Any, obs_dim: int) -> np.ndarray:
    """``observations`` of a request as a (B, obs_dim) float32 array.

    Raises:
        DataError: not a non-empty list of rows, more than :data:`MAX_BATCH` rows, a row of the
            wrong length or a value that is not a finite number; ``field`` is ``observations``
            and the message names the row (and column).
    """
    if not isinstance(value, list) or not value:
        raise DataError("observations must be a non-empty list of rows (batch, obs_dim)", field="observations")
    if len(value) > MAX_BATCH:
        raise DataError(f"observations has {len(value)} rows, at most {MAX_BATCH} per request", field="observations")
    for i, row in enumerate(value):
        if not isinstance(row, list) or len(row) != obs_dim:
            got = f"{len(row)} values" if isinstance(row, list) else type(row).__name__
            raise DataError(
                f"observations[{i}] has {got}; the agent's observation layout needs {obs_dim}",
                field="observations",
                row=i,
            )
    try:
        obs = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        obs = None
    if obs is None or obs.dtype.kind != "f" or not np.isfinite(obs).all():
        for i, row in enumerate(value):
            for j, x in enumerate(row):
                _number(x, f"observations[{i}][{j}]")
    return obs


def _holdings(body: Mapping[str, Any], tickers: list[str]) -> np.ndarray:
    value = body.get("holdings", {})
    if not isinstance(value, Mapping):
        raise DataError("holdings must be an object {ticker: shares}", field="holdings")
    unknown = [t for t in value if t not in tickers]
    if unknown:
        raise DataError(
            f"holdings names {', '.join(map(str, unknown))}, not among the agent's tickers {', '.join(tickers)}",
            field="holdings",
            ticker=str(unknown[0]),
        )
    out = np.zeros(len(tickers))
    for i, t in enumerate(tickers):
        if t in value:
            shares = _number(value[t], f"holdings.{t}")
            if shares < 0 or shares != int(shares):
                raise DataError(
                    f"holdings.{t} must be a whole number of shares >= 0, got {value[t]!r}", field=f"holdings.{t}"
                )
            out[i] = shares
    return out


def _cash(body: Mapping[str, Any], default: float) -> float:
    if "cash" not in body:
        return float(default)
    cash = _number(body["cash"], "cash")
    if cash < 0:
        raise DataError(f"cash must be >= 0 USD, got {cash}", field="cash")
    return cash


_WINDOW = re.compile(r"_(\d+)(?:_|$)")
# indicators whose window is not in the name, in days (stockstats defaults)
_IMPLIED_WINDOW = {"macd": 35, "macds": 35, "macdh": 35, "boll": 20, "boll_ub": 20, "boll_lb": 20, "rsi": 14, "cci": 14}


def min_history_days(indicators: list[str], *, scale_free: bool = False) -> int:
    """Fewest daily bars a market state needs: the longest indicator window plus one day.

    The window is read from the stockstats name (``close_30_sma`` -> 30, ``rsi_30`` -> 30) or
    taken from stockstats' defaults (MACD 26 + 9, Bollinger 20, RSI/CCI 14); a scale-free
    observation also needs its longest log-return lookback (63 days). Exponential indicators
    (MACD, RSI) still drift slightly with longer history; 250 days reproduce the training
    panel's values to ~1e-3.
    """
    from trainer.envs.observations import LOOKBACKS, VOL_WINDOW

    longest = max(max(LOOKBACKS), VOL_WINDOW) if scale_free else 1
    for name in indicators:
        match = _WINDOW.search(name)
        window = int(match.group(1)) if match else _IMPLIED_WINDOW.get(name, 1)
        longest = max(longest, window)
    return longest + 1


def _bars_panel(value: Any, tickers: list[str], need: int) -> Any:
    """Request bars -> the long panel ``build_market_data`` reads (date, tic, OHLC, volume)."""
    import pandas as pd

    if not isinstance(value, Mapping):
        raise DataError("bars must be an object {ticker: [bar, ...]}", field="bars")
    missing = [t for t in tickers if t not in value]
    extra = [str(t) for t in value if t not in tickers]
    if missing or extra:
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unknown {', '.join(extra)}"] if extra else []
        )
        raise DataError(
            f"bars must hold exactly the agent's tickers {', '.join(tickers)}: {'; '.join(parts)}",
            field="bars",
            ticker=(missing or extra)[0],
        )
    rows = []
    for t in tickers:
        bars = value[t]
        if not isinstance(bars, list):
            raise DataError(f"bars.{t} must be a list of daily bars", field=f"bars.{t}", ticker=t)
        if len(bars) < need:
            raise DataError(
                f"bars.{t} has {len(bars)} days; the agent's indicators need at least {need} days of history",
                field=f"bars.{t}",
                ticker=t,
            )
        if len(bars) > MAX_BARS:
            raise DataError(f"bars.{t} has {len(bars)} days, at most {MAX_BARS}", field=f"bars.{t}", ticker=t)
        for i, bar in enumerate(bars):
            where = f"bars.{t}[{i}]"
            if not isinstance(bar, Mapping):
                raise DataError(f"{where} must be an object with date, open, high, low, close, volume", field=where)
            row = {"tic": t}
            for key in ("open", "high", "low", "close", "volume"):
                if key not in bar:
                    raise DataError(f"{where}.{key} is missing", field=f"{where}.{key}", ticker=t)
                row[key] = _number(bar[key], f"{where}.{key}")
                if (key != "volume" and row[key] <= 0) or row[key] < 0:
                    raise DataError(
                        f"{where}.{key} must be positive, got {bar[key]!r}", field=f"{where}.{key}", ticker=t
                    )
            if row["high"] < row["low"]:
                raise DataError(f"{where}: high is below low", field=f"{where}.high", ticker=t)
            try:
                row["date"] = pd.Timestamp(_date(bar.get("date"), f"{where}.date"))
            except ValueError as exc:
                raise DataError(str(exc), field=f"{where}.date", ticker=t) from None
            rows.append(row)
    frame = pd.DataFrame(rows, columns=["date", "tic", "open", "high", "low", "close", "volume"])
    dup = frame.duplicated(["date", "tic"])
    if dup.any():
        first = frame[dup].iloc[0]
        raise DataError(
            f"bars.{first['tic']} has {first['date'].date()} twice", field=f"bars.{first['tic']}", ticker=first["tic"]
        )
    return frame.sort_values(["date", "tic"]).reset_index(drop=True)


def _date(value: Any, field: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        raise DataError(f"{field} must be a YYYY-MM-DD date, got {value!r}", field=field)
    import datetime as _dt

    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise DataError(f"{field} {value!r} is not a calendar date", field=field) from None
    return value


# ---------------------------------------------------------------------------- answers
MarketLoader = Callable[[], Any]


def _trade(
    policy: ServedPolicy, action: np.ndarray, close: np.ndarray, cash: float, holdings: np.ndarray, turbulent: bool
) -> list[dict[str, Any]]:
    """Orders of one step under the env's trade rule (see ``StockTradingVecEnv``)."""
    env = policy.config["env_config"]
    hmax, buy_cost, sell_cost = int(env["hmax"]), float(env["buy_cost_pct"]), float(env["sell_cost_pct"])
    act = np.nan_to_num(action.astype(np.float32), nan=0.0)
    shares = np.trunc(np.clip(act, -1.0, 1.0) * np.float32(hmax)).astype(np.float64)
    sells = np.clip(np.minimum(-shares, holdings), 0.0, None)
    buys = np.clip(shares, 0.0, None)
    if turbulent:
        sells, buys = holdings.copy(), np.zeros_like(buys)
    cash_after_sells = cash + float(sells @ close) * (1.0 - sell_cost)
    buy_cost_total = float(buys @ close) * (1.0 + buy_cost)
    if buy_cost_total > cash_after_sells:
        buys = np.floor(buys * (cash_after_sells / buy_cost_total * (1.0 - 1e-12)))
    orders = []
    for i, t in enumerate(policy.tickers):
        qty = float(buys[i] - sells[i])
        orders.append({
            "ticker": t,
            "action": float(action[i]),
            "shares": int(qty),
            "side": "buy" if qty > 0 else "sell" if qty < 0 else "hold",
            "price": float(close[i]),
            "value": float(qty * close[i]),
        })  # fmt: skip
    return orders


def _env_panel(policy: ServedPolicy, market: Any, env_config: Any) -> Any:
    """The panel the agent's env reads (scale-free features over the whole history when the agent
    uses them), kept for the last dataset so ``date`` requests compute it once."""
    from trainer.envs.kinds import prepare_market

    if policy.prepared is not None and policy.prepared[0] is market:
        return policy.prepared[1]
    panel = prepare_market(market, env_config)
    policy.prepared = (market, panel)
    return panel


def _market_state(policy: ServedPolicy, body: Mapping[str, Any], load_market: MarketLoader | None) -> dict[str, Any]:
    from trainer.data import DEFAULT_INDICATORS, build_market_data
    from trainer.envs.kinds import env_config_from_dict, uses_scale_free
    from trainer.envs.stock_trading import build_observation

    if policy.kind != "stock_trading":
        raise DataError(
            f"market states are served for stock-trading agents; this {policy.kind} agent takes observations",
            field="observations",
        )
    tickers = policy.tickers
    env = policy.config["env_config"]
    env_config = env_config_from_dict(policy.kind, env)
    task_data = (policy.config.get("task") or {}).get("data") or {}
    raw_indicators = list(task_data.get("indicators") or DEFAULT_INDICATORS)
    cash = _cash(body, env["initial_cash"])
    holdings = _holdings(body, tickers)
    if "date" in body:
        day = _date(body["date"], "date")
        if load_market is None:
            raise DataError("this server has no market data; start it with --data-dir, or send bars", field="date")
        market = _env_panel(policy, load_market(), env_config)
        dates = [str(d)[:10] for d in market.dates]
        if day not in dates:
            raise DataError(
                f"date {day} is not a trading day of the agent's dataset ({dates[0]} to {dates[-1]})", field="date"
            )
        t = dates.index(day)
    else:
        need = min_history_days(raw_indicators, scale_free=uses_scale_free(env_config))
        panel = _bars_panel(body["bars"], tickers, need)
        try:
            market = build_market_data(
                panel, tickers=tickers, indicators=raw_indicators, turbulence=True,
                missing_policy=task_data.get("missing_policy", "drop"), source="request bars",
            )  # fmt: skip
        except TrainerError as exc:
            raise DataError(
                exc.message, field="bars", **{k: v for k, v in exc.details.items() if k != "field"}
            ) from None
        if len(market.dates) < need:
            raise DataError(
                f"bars cover {len(market.dates)} common days; the agent's indicators need at least {need}", field="bars"
            )
        market = _env_panel(policy, market, env_config)
        t = len(market.dates) - 1
        day = str(market.dates[t])[:10]
    if list(market.tickers) != tickers or list(market.feature_names) != list(policy.config["indicators"]):
        raise DataError(
            f"the market data (tickers {list(market.tickers)}, features {list(market.feature_names)}) differs from the "
            f"agent's (tickers {tickers}, features {list(policy.config['indicators'])})",
            field="data",
        )
    close = np.asarray(market.close[t], dtype=np.float64)
    if cash + float(holdings @ close) <= 0:
        raise DataError("cash and holdings are worth nothing; send cash > 0 or some holdings", field="cash")
    features = np.asarray(market.features[t], dtype=np.float64)  # (N, F)
    obs = build_observation(policy.config["observation_layout"], cash, holdings, close, features)
    action = policy.act(obs[None])[0]
    threshold = env.get("turbulence_threshold")
    turbulent = threshold is not None and float(market.turbulence[t]) >= float(threshold)
    return {
        "date": day,
        "action": action.tolist(),
        "orders": _trade(policy, action, close, cash, holdings, turbulent),
        "prices": dict(zip(tickers, close.tolist())),
        "cash": cash,
        "holdings": dict(zip(tickers, holdings.tolist())),
        "turbulent": turbulent,
        "observation": obs.tolist(),
    }


def answer(policy: ServedPolicy, body: Any, *, load_market: MarketLoader | None = None) -> dict[str, Any]:
    """The JSON answer to one act request (see the module doc for both forms).

    Args:
        policy: the agent's loaded policy.
        body: the decoded JSON body.
        load_market: returns the agent's dataset as ``MarketData`` (needed for ``date``).

    Returns:
        For observations: ``{"algorithm", "actions": (B, action_dim)}``; for a market state:
        ``{"algorithm", "date", "action", "orders", "prices", "cash", "holdings", "turbulent",
        "observation"}``.

    Raises:
        DataError: a bad body, naming the field.
    """
    if not isinstance(body, Mapping):
        raise DataError("the request body must be a JSON object", field="body")
    forms = [k for k in ("observations", "date", "bars") if k in body]
    if len(forms) != 1:
        raise DataError(
            "send exactly one of observations (a batch), date (a dataset day) or bars (recent daily bars)",
            field="observations" if not forms else forms[1],
        )
    if forms[0] == "observations":
        obs = parse_observations(body["observations"], policy.obs_dim)
        return {"algorithm": policy.config["algorithm"], "actions": policy.act(obs).tolist()}
    return {"algorithm": policy.config["algorithm"], **_market_state(policy, body, load_market)}


# ---------------------------------------------------------------------------- standalone HTTP
_ACT_PATH = re.compile(r"^/(?:api/agents/[^/]+/)?act/?$")


def make_server(
    bundle: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8500,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
) -> ThreadingHTTPServer:
    """An HTTP server answering ``POST /act`` (and ``/api/agents/<any>/act``) for one bundle.

    Same bodies and answers as the web app's endpoint; errors are HTTP 400 with
    ``{"error": message, "fields": {field: message}}``; ``GET /healthz`` answers the agent's
    algorithm, tickers and dimensions. No authentication: bind it to localhost or put it behind
    a proxy that authenticates.

    Args:
        bundle: the agent bundle zip.
        host, port: where to listen (port 0 picks a free one: ``server.server_address``).
        data_dir: folder of the task's data files, for ``{"date": ...}`` requests.
        cache_dir: Parquet cache of processed market data.

    Raises:
        BundleError: the bundle cannot be loaded.
    """
    policy = ServedPolicy.load(bundle)
    market: list[Any] = []
    lock = threading.Lock()

    def load_market() -> Any:
        from trainer.data import DataSpec, load_market_data

        with lock:
            if not market:
                spec = DataSpec.from_dict(policy.config["task"]["data"], prefix="data.")
                market.append(load_market_data(spec, data_dir=data_dir, cache_dir=cache_dir))
            return market[0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            # answers are written as headers then body: without TCP_NODELAY, Nagle's algorithm
            # holds the body back until the client's delayed ACK (~40 ms on Linux)
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            return  # no per-request log lines on stderr

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload, allow_nan=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            if self.path.rstrip("/") == "/healthz":
                info = {"algorithm": policy.config["algorithm"], "tickers": policy.tickers}
                self._send(200, {**info, "obs_dim": policy.obs_dim, "action_dim": policy.action_dim})
            else:
                self._send(404, {"error": f"no such path {self.path}; POST /act", "fields": {}})

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not _ACT_PATH.match(self.path.split("?")[0]):
                self._send(404, {"error": f"no such path {self.path}; POST /act", "fields": {}})
                return
            try:
                body = json.loads(raw or b"null")
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                self._send(400, {"error": f"the body is not valid JSON ({exc})", "fields": {"body": "not valid JSON"}})
                return
            try:
                self._send(200, answer(policy, body, load_market=load_market))
            except TrainerError as exc:
                field = exc.details.get("field") or "body"
                self._send(400, {"error": exc.message, "fields": {field: exc.message}})

    return ThreadingHTTPServer((host, port), Handler)
