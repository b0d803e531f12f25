"""The ``type=`` functions of ``python -m trainer``'s numeric and ``NAME=VALUE`` options: each
turns the text typed into a value or raises ``argparse.ArgumentTypeError``, which the parser
reports as one ``error: argument --flag: ...`` line and exit status 2.

Every whole-number option has an upper bound, so that a typo (``--generations 1e30``) is an
error naming the flag, not a list of 1e30 generations built in memory."""

from __future__ import annotations

import argparse
import contextlib
import math
from typing import Any

import yaml

from trainer.cli.inputs import read_yaml
from trainer.util.bounds import SEED

__all__ = [
    "MAX_CANDIDATES",
    "MAX_ENV_STEPS",
    "MAX_GENERATIONS",
    "candidates",
    "env_steps",
    "generations",
    "hp_pair",
    "port",
    "positive_int",
    "seed",
    "trade_rate",
    "whole",
]

#: The most env steps one command trains (the web's bound on a generation, too).
MAX_ENV_STEPS = 1_000_000_000
#: The most generations one ``train`` command runs (each writes a checkpoint).
MAX_GENERATIONS = 10_000
#: The most candidates (seeds) a walk-forward fold trains: the web study's most pods per fold.
MAX_CANDIDATES = 64


def positive_int(text: str) -> int:
    """A whole number >= 1; accepts ``1000000``, ``1_000_000`` and ``1e6``."""
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not math.isfinite(value) or value != int(value) or value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 1")
    return int(value)


def _at_most(text: str, most: int, what: str) -> int:
    """:func:`positive_int`, at most ``most`` (``what`` names the unit in the message)."""
    value = positive_int(text)
    if value > most:
        raise argparse.ArgumentTypeError(f"{text!r} is more than {most:,} {what}")
    return value


def env_steps(text: str) -> int:
    """A whole number of env steps in [1, :data:`MAX_ENV_STEPS`]."""
    return _at_most(text, MAX_ENV_STEPS, "env steps")


def generations(text: str) -> int:
    """A whole number of generations in [1, :data:`MAX_GENERATIONS`]."""
    return _at_most(text, MAX_GENERATIONS, "generations")


def candidates(text: str) -> int:
    """A whole number of candidates per fold in [1, :data:`MAX_CANDIDATES`]."""
    return _at_most(text, MAX_CANDIDATES, "candidates")


def whole(text: str) -> int:
    """A whole number >= 0."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= 0")
    return value


def seed(text: str) -> int:
    """A random seed, a whole number in :data:`trainer.util.bounds.SEED` (0 to 2,147,483,647)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:  # also a number of more than 4,300 digits
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
    if SEED.error(value):
        shown = text.strip() if len(text.strip()) <= 40 else f"a {len(str(abs(value)))}-digit number"
        raise argparse.ArgumentTypeError(f"{shown} must be {SEED.text(words=True)}")
    return value


def trade_rate(text: str) -> float:
    """A fraction in (0, 1] (the portfolio env's ``trade_rate``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]: the fraction of the way traded per step")
    return value


def hp_pair(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of ``--hp``, the value read as YAML (a number where YAML 1.1 reads text)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} must look like name=value, e.g. learning_rate=1e-4")
    try:
        value = read_yaml(raw)  # true/false are booleans, "yes" stays the text typed
    except yaml.YAMLError:
        value = raw
    if isinstance(value, str):  # YAML 1.1 reads 1e-4 as a string; numbers are meant here
        with contextlib.suppress(ValueError):
            value = float(value)
    return key.strip(), value


def port(text: str) -> int:
    """A TCP port, 0 to 65535 (0 picks a free one)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not in 0..65535")
    return value
