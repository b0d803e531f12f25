"""The pages write numbers and durations with ``webapp/core/formatting.py`` (server) and
``static/js/format.js`` (live updates); both must give the same text for the same value."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.conftest import REPO_ROOT
from webapp.core import formatting

DURATIONS = [0, 0.4, 0.5, 59.4, 59.5, 60, 119.6, 120, 3599.4, 3599.5, 3600, 5400, 86399, 86400, 90000, -1, None]
GENERALS = [1e-5, 3e-4, 0.01, 0.5, 1, 100, 1234, 99999, 1234567, 1.23456e-7, 2.5e-4, -0.0003, True, None, "relu"]
NUMBERS = [(0.81234, 3), (1.0, 3), (-2.71828, 2), (None, 3), (1234.5678, 1)]
COUNTS = [0, 1, 999, 1000, 1234567.4, 1234567.6, None]


def _javascript(calls: list[list]) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = (
        "const f = require(process.argv[1]);"
        "const calls = JSON.parse(process.argv[2]);"
        "console.log(JSON.stringify(calls.map(([name, ...args]) => f[name](...args))));"
    )
    out = subprocess.run(
        [node, "-e", script, str(REPO_ROOT / "static" / "js" / "format.js"), json.dumps(calls)],
        check=True,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return json.loads(out.stdout)


def test_python_and_javascript_write_durations_numbers_and_counts_alike():
    calls = (
        [["duration", v] for v in DURATIONS]
        + [["general", v, 4] for v in GENERALS]
        + [["number", v, d] for v, d in NUMBERS]
        + [["count", v] for v in COUNTS]
        + [["hyperparameters", {"learning_rate": 1e-5, "ent_coef": 0.01, "norm": True}, ["learning_rate", "x", "norm"]]]
    )
    python = (
        [formatting.format_duration(v) for v in DURATIONS]
        + [formatting.format_general(v, 4) for v in GENERALS]
        + [formatting.format_number(v, d) for v, d in NUMBERS]
        + [formatting.format_count(v) for v in COUNTS]
        + [
            formatting.format_hyperparameters(
                {"learning_rate": 1e-5, "ent_coef": 0.01, "norm": True}, ["learning_rate", "x", "norm"]
            )
        ]
    )
    assert _javascript(calls) == python


def test_the_examples_the_issue_names():
    assert formatting.format_duration(119.6) == "2 min"  # the browser wrote "1 min 60 s"
    assert formatting.format_general(1e-5) == "1e-05"  # the browser wrote "0.00001"
    assert formatting.format_hyperparameters({"learning_rate": 1e-5}, ["learning_rate"]) == "learning_rate=1e-05"
    assert formatting.format_duration(5400) == "1 h 30 min"
    assert formatting.format_count(1234567.4) == "1,234,567"
