"""``python -m trainer walk-forward`` on the real Dow-30 file: 2 folds x 2 candidates, a tiny budget."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainer.cli.main import main

REPO = Path(__file__).resolve().parents[3]
TINY = [
    "--env", "portfolio",
    "--algo", "ppo",
    "--tickers", "AAPL,MSFT,JPM",
    "--candidates", "2",
    "--env-steps", "256",
    "--num-envs", "32",
    "--hp", "rollout_steps=8",
    "--hp", "num_minibatches=2",
    "--hp", "hidden_sizes=[32, 32]",
    "--device", "cpu",
]  # fmt: skip


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PADDOCK_TORCH_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "trainer", "walk-forward", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def study(data_dir, tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("study")
    proc = run_cli(
        "--data-dir", str(data_dir), "--start", "2016-01-01", "--end", "2019-12-31",
        "--first-test-year", "2018", "--out", str(out), "--json", *TINY,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), out


def test_each_fold_is_tested_on_its_year_after_training_and_selecting_on_the_days_before(study):
    result, _ = study
    folds = result["folds"]
    assert [f["test"]["start"][:4] for f in folds] == ["2018", "2019"]
    for fold in folds:
        assert fold["train"]["start"] == "2016-01-04"  # anchored
        assert fold["train"]["end"] < fold["validation"]["start"] < fold["validation"]["end"] < fold["test"]["start"]
        scores = [c["score"] for c in fold["candidates"]]
        assert fold["selected"] == fold["candidates"][int(np.argmax(scores))]  # the best on validation
        assert fold["vs_equal_weight"]["verdict"] in ("beats", "trails", "indistinguishable")
        assert fold["test_metrics"]["num_days"] >= 240
    assert folds[1]["train"]["end"] > folds[0]["train"]["end"]  # the window expands


def test_the_stitched_record_is_the_selected_agents_test_days_against_1_over_n(study):
    result, _ = study
    oos = result["out_of_sample"]
    days = oos["dates"]
    assert days == sorted(days) and len(set(days)) == len(days)
    assert days[0] > result["folds"][0]["test"]["start"] and days[-1] == "2019-12-31"
    assert len(oos["returns"]) == len(oos["equal_weight"]) == len(oos["qqq"]) == len(days)
    growth = np.prod(1 + np.array(oos["returns"])) - 1
    assert growth == pytest.approx(oos["metrics"]["cumulative_return"], rel=1e-9)
    rel = oos["vs_equal_weight"]
    low, high = rel["ci95"]
    assert low <= rel["sharpe_difference"] <= high and rel["n_periods"] == len(days)
    assert rel["verdict"] == ("beats" if low > 0 else "trails" if high < 0 else "indistinguishable")


def test_pbo_covers_every_candidate_on_every_test_day(study):
    result, out = study
    pbo = result["pbo"]
    assert 0.0 <= pbo["pbo"] <= 1.0
    assert pbo["candidates"] == 2 and pbo["blocks"] == 16 and pbo["combinations"] == 12870
    assert pbo["rows_used"] <= len(result["out_of_sample"]["dates"]) < pbo["rows_used"] + 16
    assert json.loads((out / "study.json").read_text()) == result
    assert (out / "fold-1" / "candidate-1.pt").is_file()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--start", "2016-01-01", "--end", "2019-12-31", "--first-test-year", "2030"], "--first-test-year"),
        (["--start", "2016-13-01", "--end", "2019-12-31", "--first-test-year", "2018"], "--start"),
        (["--start", "", "--end", "2019-12-31", "--first-test-year", "2018"], "--start"),
        # before the data's first day (2010-01-04): it trained from 2010 silently
        (
            ["--start", "1990-01-01", "--end", "2019-12-31", "--first-test-year", "2018"],
            "--start: 1990-01-01 is before",
        ),
        (["--start", "2016-01-01", "--end", "2022-12-31", "--first-test-year", "2018"], "--end: 2022-12-31 is after"),
        (["--start", "2016-01-01", "--end", "", "--first-test-year", "2018"], "--end"),
        (
            ["--start", "2016-01-01", "--end", "2019-12-31", "--first-test-year", "2018", "--gap-days", "-1"],
            "--gap-days",
        ),
        (
            ["--start", "2016-01-01", "--end", "2019-12-31", "--first-test-year", "2018", "--env-steps", "8"],
            "--env-steps",
        ),
        (["--start", "2016-01-01", "--end", "2018-01-10", "--first-test-year", "2018"], "--end"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(data_dir, tmp_path, capsys, flags, named):
    with pytest.raises(SystemExit) if "--gap-days" in flags else contextlib.nullcontext():
        status = main(["walk-forward", "--data-dir", str(data_dir), "--out", str(tmp_path / "never"), *TINY, *flags])
        assert status == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: ") and named in line
    assert not (tmp_path / "never").exists()


def test_the_text_report_has_a_line_per_fold_then_the_record_and_pbo(study):
    from trainer.cli.walk_forward import format_study

    result, _ = study
    lines = format_study(result)
    assert [line.split(":")[0] for line in lines] == ["fold 0", "fold 1", "out of sample", "vs 1/N", "PBO"]
    assert result["out_of_sample"]["vs_equal_weight"]["verdict"] in lines[3]
