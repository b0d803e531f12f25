"""The standalone HTTP server of ``python -m trainer serve BUNDLE.zip``: the web app's act
endpoint for one bundle, without Django."""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError
from trainer.limits import DEFAULT_LIMITS, InputLimits
from trainer.serving.answers import answer
from trainer.serving.bodies import MAX_JSON_DEPTH, nesting_depth
from trainer.serving.policy import ServedPolicy

_ACT_PATH = re.compile(r"^/(?:api/agents/[^/]+/)?act/?$")
#: A JSON string, or (group 1) a number token outside strings that Python's ``json`` reads but
#: RFC 8259 (section 6) does not allow.
_STRING_OR_NONSTANDARD = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|(-?Infinity|NaN)', re.DOTALL)


class NonStandardNumber(ValueError):
    """A body holds ``NaN``, ``Infinity`` or ``-Infinity`` (``token``), which Python's ``json``
    reads as floats but JSON does not allow; ``where`` is its place as ``json`` gives one
    (``"line 1 column 24 (char 23)"``), or ``""`` when it cannot be found."""

    def __init__(self, token: str) -> None:
        super().__init__(f"{token} is a non-standard JSON number")
        self.token, self.where = token, ""


def _refuse_constant(token: str) -> Any:
    raise NonStandardNumber(token)


def decode_body(raw: bytes) -> Any:
    """The JSON value of a request body (empty: ``None``), read as strictly as RFC 8259 asks.

    Raises:
        NonStandardNumber: the body holds ``NaN``, ``Infinity`` or ``-Infinity``; refused as it
            is read, before any field is looked at.
        ValueError: not JSON, not UTF-8 (or -16, -32), an integer of over 4,300 digits.
        RecursionError: thousands of nested levels (the decoder gave up).
    """
    text = raw.decode(json.detect_encoding(raw), "surrogatepass") if raw else "null"
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except NonStandardNumber as exc:
        # the first such token outside a string is the one the decoder met: all before it parsed
        found = next((m.start(1) for m in _STRING_OR_NONSTANDARD.finditer(text) if m.group(1)), None)
        if found is not None:
            at = json.JSONDecodeError("", text, found)
            exc.where = f"line {at.lineno} column {at.colno} (char {at.pos})"
        raise


class _Server(ThreadingHTTPServer):
    """The server of one bundle's policy; its market data is loaded on the first ``date`` request."""

    def __init__(
        self,
        address: tuple[str, int],
        policy: ServedPolicy,
        *,
        data_dir: str | Path | None,
        cache_dir: str | Path | None,
        limits: InputLimits,
    ) -> None:
        self.policy, self.limits = policy, limits
        self._data = (data_dir, cache_dir)
        self._market: list[Any] = []
        self._lock = threading.Lock()
        super().__init__(address, _Handler)

    def load_market(self) -> Any:
        """The agent's dataset (``MarketData``), read once."""
        from trainer.data.pipeline import load_market_data
        from trainer.data.spec import DataSpec

        with self._lock:
            if not self._market:
                spec = DataSpec.from_dict(self.policy.config["task"]["data"], prefix="data.")
                data_dir, cache_dir = self._data
                self._market.append(load_market_data(spec, data_dir=data_dir, cache_dir=cache_dir, limits=self.limits))
            return self._market[0]

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line on stderr, not socketserver's traceback (a client that went away mid-answer)."""
        exc = sys.exc_info()[1]
        sys.stderr.write(f"error: answering {client_address[0]}: {exc!r}"[:1000] + "\n")


class _Handler(BaseHTTPRequestHandler):
    """One connection of :class:`_Server`: its policy, market data and limits are the server's."""

    protocol_version = "HTTP/1.1"
    server: _Server

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
        if length > self.server.limits.request_bytes:
            message = f"the body is {length:,} bytes, more than {self.server.limits.request_bytes:,} bytes (the limit)"
            self._send(413, {"error": message, "fields": {"body": message}}, close=True)
            return None
        return self.rfile.read(length) if length else b""

    def _internal_error(self, exc: BaseException) -> None:
        """The last resort: a 500 in the error format and one line on stderr."""
        sys.stderr.write(f"error: {self.command} {self.path[:200]}: internal error: {exc!r}"[:1000] + "\n")
        message = f"internal error ({type(exc).__name__}); the server's log has a line about it"
        try:
            self._send(500, {"error": message, "fields": {}}, close=True)
        except OSError:  # the client is gone
            self.close_connection = True

    def _answering(self, respond: Any) -> None:
        """``respond()``, with the last resort for what it raises."""
        try:
            respond()
        except ConnectionError:  # the client went away mid-answer: nobody to answer
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - answer 500, never drop the connection
            self._internal_error(exc)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._answering(self._get)

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        self._answering(self._post)

    def _get(self) -> None:
        policy = self.server.policy
        if self.path.rstrip("/") == "/healthz":
            info = {"algorithm": policy.config["algorithm"], "tickers": policy.tickers}
            self._send(200, {**info, "obs_dim": policy.obs_dim, "action_dim": policy.action_dim})
        else:
            self._send(404, {"error": f"no such path {self.path}; POST /act", "fields": {}})

    def _post(self) -> None:
        raw = self._body()
        if raw is None:
            return
        if not _ACT_PATH.match(self.path.split("?")[0]):
            self._send(404, {"error": f"no such path {self.path}; POST /act", "fields": {}})
            return
        deep = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        too_deep = {"error": deep, "fields": {"body": deep}}
        try:
            body = decode_body(raw)
        except RecursionError:  # thousands of levels: the decoder gave up
            self._send(400, too_deep)
            return
        except NonStandardNumber as exc:
            where = f" at {exc.where}" if exc.where else ""
            message = (
                f"the body is not valid JSON: it holds {exc.token}{where}, a non-standard JSON number (JSON "
                "numbers are finite); send finite numbers"
            )
            self._send(400, {"error": message, "fields": {"body": f"not valid JSON: {exc}"}})
            return
        except ValueError as exc:  # not JSON, not UTF-8, an integer of over 4,300 digits
            self._send(
                400, {"error": f"the body is not valid JSON ({exc})"[:300], "fields": {"body": "not valid JSON"}}
            )
            return
        if nesting_depth(body, stop_at=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:  # the web app's limit
            self._send(400, too_deep)
            return
        try:
            out = answer(self.server.policy, body, load_market=self.server.load_market)
        except TrainerError as exc:
            field = exc.details.get("field") or "body"
            self._send(400, {"error": exc.message, "fields": {field: exc.message}})
            return
        self._send(200, out)


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
    answered before any of the body is read (the connection is then closed); a body that is
    not JSON or nests deeper than :data:`~trainer.serving.bodies.MAX_JSON_DEPTH` is a 400
    (``body``), and so is one holding ``NaN``, ``Infinity`` or ``-Infinity`` (refused as it is
    read, :func:`decode_body`: ``"not valid JSON: NaN is a non-standard JSON number"``); one
    whose answer would not be finite is a 400 naming the field responsible.
    Anything else that goes wrong while answering is a 500 in the same format, with one line
    on stderr (never a traceback, never a dropped connection). ``GET /healthz`` answers the
    agent's algorithm, tickers and dimensions. No authentication: bind it to localhost or put
    it behind a proxy that authenticates.

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
    return _Server((host, port), policy, data_dir=data_dir, cache_dir=cache_dir, limits=limits)
