"""Runs the device-discipline tests (``test_device_discipline.py``) in a fresh interpreter.

torch's autograd engine sizes its per-device ready queues when it first runs; the stand-in
accelerator registered later in the same process then fails every backward pass on it with an
internal assertion. A child pytest process registers the stand-in before autograd ever runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_device_discipline_holds_in_a_fresh_interpreter():
    env = {**os.environ, "PADDOCK_DISCIPLINE_CHILD": "1"}
    child = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/trainer/test_device_discipline.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    tail = "\n".join((child.stdout + child.stderr).splitlines()[-60:])
    assert child.returncode == 0, f"device-discipline tests failed in the child pytest:\n{tail}"
    assert " passed" in tail and " skipped" not in tail.splitlines()[-1], tail
