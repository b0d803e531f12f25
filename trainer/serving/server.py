"""The standalone HTTP server of ``python -m trainer serve BUNDLE.zip``: the web app's act
endpoint for one bundle, without Django."""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError
from trainer.limits import DEFAULT_LIMITS, InputLimits
from trainer.serving.answers import answer
from trainer.serving.policy import ServedPolicy

_ACT_PATH = re.compile(r"^/(?:api/agents/[^/]+/)?act/?$")


def make_server(
    bundle: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8500,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> ThreadingHTTPServer:
    """An HTTP server answering ``POST /act`` (and ``/api/agents/<any>/act``) for one bundle.

    Same bodies and answers as the web app's endpoint; errors are HTTP 400 with
    ``{"error": message, "fields": {field: message}}``; a ``Content-Length`` that is not a
    whole number >= 0 is a 400 and one above ``limits.request_bytes`` a 413 (field ``body``),
    answered before any of the body is read (the connection is then closed); ``GET /healthz`` answers the agent's
    algorithm, tickers and dimensions. No authentication: bind it to localhost or put it behind
    a proxy that authenticates.

    Args:
        bundle: the agent bundle zip.
        host, port: where to listen (port 0 picks a free one: ``server.server_address``).
        data_dir: folder of the task's data files, for ``{"date": ...}`` requests.
        cache_dir: Parquet cache of processed market data.
        limits: the request body cap (``request_bytes``), the bundle's and the data files' caps.

    Raises:
        BundleError: the bundle cannot be loaded.
    """
    policy = ServedPolicy.load(bundle, limits=limits)
    market: list[Any] = []
    lock = threading.Lock()

    def load_market() -> Any:
        from trainer.data.pipeline import load_market_data
        from trainer.data.spec import DataSpec

        with lock:
            if not market:
                spec = DataSpec.from_dict(policy.config["task"]["data"], prefix="data.")
                market.append(load_market_data(spec, data_dir=data_dir, cache_dir=cache_dir, limits=limits))
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

        def _send(self, status: int, payload: dict[str, Any], *, close: bool = False) -> None:
            data = json.dumps(payload, allow_nan=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:  # the body was not read: the next bytes on the socket are not a request
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> bytes | None:
            """The request body, or ``None`` after answering 400/413 for its length."""
            text = (self.headers.get("Content-Length") or "0").strip()
            if not text.isascii() or not text.isdigit():
                message = f"Content-Length {text[:40]!r} is not a whole number of bytes"
                self._send(400, {"error": message, "fields": {"body": message}}, close=True)
                return None
            length = int(text)
            if length > limits.request_bytes:
                message = f"the body is {length:,} bytes, more than {limits.request_bytes:,} bytes (the limit)"
                self._send(413, {"error": message, "fields": {"body": message}}, close=True)
                return None
            return self.rfile.read(length) if length else b""

        def do_GET(self) -> None:  # noqa: N802 - stdlib naming
            if self.path.rstrip("/") == "/healthz":
                info = {"algorithm": policy.config["algorithm"], "tickers": policy.tickers}
                self._send(200, {**info, "obs_dim": policy.obs_dim, "action_dim": policy.action_dim})
            else:
                self._send(404, {"error": f"no such path {self.path}; POST /act", "fields": {}})

        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            raw = self._body()
            if raw is None:
                return
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
