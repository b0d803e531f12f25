"""The device check (``benchmarks/gpu_check.sh``) runs: its dry run, every phase tiny on the CPU.

The real check runs on a lent accelerator machine (docs/gpu.md); this keeps it from rotting
between loans. It runs through the shell wrapper on the carried-data layout the device machine
sees: a data slice written by ``gpu_check.py prepare`` (here into a temporary folder, never
into the repository) and no wheels (this virtualenv has every package).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PHASES = ["machine", "env_eager", "env_compiled", "env_cuda_graph", "ppo_learn", "sac_learn", "export_cpu"]


@pytest.mark.slow
def test_the_device_check_dry_run_passes_every_phase_and_prints_one_json_line_each(data_dir, tmp_path):
    sample = tmp_path / "sample"
    script = ROOT / "benchmarks" / "gpu_check.py"
    prepared = subprocess.run(
        [sys.executable, str(script), "prepare", "--no-wheels", "--data-dir", str(data_dir), "--dir", str(sample)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    assert (sample / "data").is_dir()
    child = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run", "--data-dir", str(sample / "data")],
        capture_output=True, text=True, timeout=240, env={**os.environ, "PYTHON": sys.executable},
    )  # fmt: skip
    lines = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    assert [line["phase"] for line in lines] == PHASES, child.stdout[-3000:] + child.stderr[-3000:]
    assert child.returncode == 0, child.stdout[-3000:]
    by_phase = {line["phase"]: line for line in lines}
    assert all(line["status"] in ("ok", "skipped") for line in lines)
    assert {row["env"] for row in by_phase["env_eager"]["rows"]} == {"portfolio", "stock_trading"}
    assert all(row["episode_ends"] > 0 and row["max_abs_diff"] < 1e-4 for row in by_phase["env_compiled"]["rows"])
    assert by_phase["ppo_learn"]["collect_s"] > 0 and by_phase["ppo_learn"]["update_s"] > 0
    assert by_phase["export_cpu"]["bundle_vs_checkpoint_max_diff"] == 0.0
