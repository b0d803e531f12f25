"""benchmarks/fold_comparison.py: rule 4b's check pooled over the JSON reports of
default_selection.py, one per market."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import fold_comparison  # noqa: E402


def _report(path: Path, market: str, figures: dict[str, list[float]], turnover: float = 0.001) -> str:
    """A report with one row per fold and candidate: ``figures[name][fold]`` is its validation
    Sharpe difference against cost-free 1/N."""
    rows = [
        {
            "market": market,
            "fold": fold,
            "candidate": name,
            "seed": 0,
            "validation_difference": value,
            "validation_turnover": turnover,
            "challenger": {"kept": fold == 0, "p_value": 0.01} if name == "new" else None,
        }
        for name, values in figures.items()
        for fold, value in enumerate(values)
    ]
    path.write_text(json.dumps({"default": "old", "rows": rows}))
    return str(path)


def test_two_markets_pool_into_one_paired_comparison(tmp_path, capsys):
    dow = _report(tmp_path / "dow.json", "dow30", {"old": [-0.05, 0.02, -0.01], "new": [-0.04, 0.03, -0.03]})
    nasdaq = _report(tmp_path / "ndx.json", "nasdaq100", {"old": [0.01, -0.02], "new": [0.02, -0.02]})
    result = fold_comparison.compare(fold_comparison.load_rows([dow, nasdaq]), "new", "old")
    gaps = np.array([0.01, 0.01, -0.02, 0.01, 0.0])
    assert result["folds"] == 5 and result["passed"]
    assert result["vs_reference"]["mean"] == pytest.approx(gaps.mean())
    assert result["vs_reference"]["se"] == pytest.approx(gaps.std(ddof=1) / np.sqrt(5))
    assert result["vs_reference"]["worst"] == pytest.approx(-0.02)
    assert result["gate_kept"] == (2, 5)
    assert fold_comparison.main([dow, nasdaq, "--candidate", "new", "--reference", "old"]) == 0
    out = capsys.readouterr().out
    assert "Rule 4b, new against old on 5 folds: per-fold difference +0.002 ± 0.006, worst -0.020" in out
    assert out.rstrip().endswith("Gate kept the challenger in 2 of 5 trainings")


def test_one_fold_far_below_the_reference_fails_the_rule(tmp_path):
    dow = _report(tmp_path / "dow.json", "dow30", {"old": [0.0, 0.0, 0.0], "new": [0.05, 0.05, -0.11]})
    assert fold_comparison.main([dow, "--candidate", "new", "--reference", "old"]) == 1


def test_turnover_above_three_percent_a_day_fails_the_rule(tmp_path):
    dow = _report(tmp_path / "dow.json", "dow30", {"old": [0.0, 0.0], "new": [0.01, 0.01]}, turnover=0.04)
    assert not fold_comparison.compare(fold_comparison.load_rows([dow]), "new", "old")["passed"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "cannot read it as JSON"),
        (json.dumps({"default": "old"}), "no 'rows' list"),
        (json.dumps({"rows": [{"market": "dow30"}]}), "row 0 has no 'fold'"),
    ],
)
def test_a_file_that_is_not_a_report_is_exit_2_naming_it(tmp_path, capsys, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert fold_comparison.main([str(path), "--candidate", "new", "--reference", "old"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"fold_comparison: {path}: ") and message in err


def test_a_name_not_in_the_files_is_exit_2_naming_the_flag(tmp_path, capsys):
    dow = _report(tmp_path / "dow.json", "dow30", {"old": [0.0], "new": [0.0]})
    assert fold_comparison.main([dow, "--candidate", "newer", "--reference", "old"]) == 2
    assert "--candidate: 'newer' is not in the files (they hold new, old)" in capsys.readouterr().err


def test_no_fold_in_common_is_exit_2(tmp_path, capsys):
    dow = _report(tmp_path / "dow.json", "dow30", {"old": [0.0]})
    ndx = _report(tmp_path / "ndx.json", "nasdaq100", {"new": [0.0]})
    assert fold_comparison.main([dow, ndx, "--candidate", "new", "--reference", "old"]) == 2
    assert "'new' and 'old' ran on no fold in common" in capsys.readouterr().err
