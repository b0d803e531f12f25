"""Errors raised by the trainer package.

Every error a user can cause (bad data, bad config, bad bundle) is a subclass of
:class:`TrainerError`. It carries a one-line message plus structured ``details`` (file, row,
ticker, date, field) so the CLI can print one clear line (exit 2) and the web side can map it
to an HTTP 400 with field messages, never a traceback.
"""

from __future__ import annotations

from typing import Any


def error_summary(exc: BaseException) -> str:
    """The first line of an exception's message (at most 300 characters), or its type's name
    when it has none: the trainer's one way to quote a foreign error (zip, YAML, safetensors)
    inside a one-line message of its own."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


class TrainerError(Exception):
    """Base class of user-facing trainer errors.

    Args:
        message: one human-readable line naming what is wrong and where.
        **details: structured context, e.g. ``field="ppo.learning_rate"``, ``file=...``,
            ``row=12``, ``ticker="AAPL"``, ``date="2020-01-02"``. Values must be JSON-able.
    """

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {k: v for k, v in details.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"error": message, **details}`` for JSON responses and logs."""
        return {"error": self.message, **self.details}

    @property
    def reason(self) -> str:
        """What is wrong, without the field name the message starts with (``"env.hmax: must be
        at least 1, got 0"`` -> ``"must be at least 1, got 0"``); the whole message when it does
        not start with ``details["field"]``."""
        name, text = str(self.details.get("field") or ""), self.message.strip()
        if name and text.startswith(name) and text[len(name) : len(name) + 1] in (":", " "):
            return text[len(name) :].lstrip(": ") or text
        return text

    def under(self, field: str) -> TrainerError:
        """The same error (same type and details) about ``field`` instead: ``details["field"]``
        is ``field`` and the message is rebuilt as ``"<field>: <reason>"``, so a nested config's
        error names its path in the enclosing spec without rewriting the message's text."""
        return type(self)(f"{field}: {self.reason}", **{**self.details, "field": field})


class DataError(TrainerError):
    """Market data that cannot be used: missing columns, bad rows, unknown tickers, ..."""


class ConfigError(TrainerError):
    """An impossible configuration value; ``details["field"]`` names the field (dotted path)."""


class BundleError(TrainerError):
    """A checkpoint or agent bundle that is missing, truncated, tampered with or incompatible."""


class Cancelled(TrainerError):
    """Training was stopped through the cancel signal (not an error of the user's input)."""


class Diverged(TrainerError):
    """Training diverged: a loss, gradient norm or parameter became NaN or infinite, or the
    trained policy emits non-finite actions.

    A permanent failure of the generation (the same hyperparameters would diverge again): no
    checkpoint is written, the CLI exits with status 1 and the web fails the generation
    without retrying it. ``message`` is one line such as ``"PPO diverged at update 37: policy
    loss is NaN; learning_rate=1000"``; ``details`` hold ``algorithm``, ``update``,
    ``quantity``, ``value``, ``hyperparameters`` (the step sizes named in the message) and
    ``stats`` (the training statistics at the divergence, non-finite ones as ``"NaN"``/``"inf"``).
    """


class PolicyError(TrainerError):
    """A policy that cannot be evaluated: it emits NaN or infinite actions. ``details`` name
    the ``policy`` and the ``date`` of the first such action."""
