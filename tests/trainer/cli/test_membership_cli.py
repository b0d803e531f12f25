"""``--membership FILE`` on ``train`` and ``walk-forward``: a bad file exits 2 with one line naming
the row and the ticker; a good one is in the task and the data notes say the universe is
point-in-time."""

from __future__ import annotations

import json

import pytest
import torch

from tests.membership_files import write_membership, write_prices
from trainer.cli.main import main

SPLITS = ["--train", "2018-01-02", "2019-06-28", "--validation", "2019-07-01", "2019-09-30"]
SPLITS += ["--test", "2019-10-01", "2019-12-31"]
TINY = ["--env-steps", "64", "--num-envs", "8", "--hp", "rollout_steps=8", "--hp", "hidden_sizes=[8]"]
TINY += ["--hp", "num_minibatches=1", "--no-progress"]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def prices(data_dir, tmp_path_factory):
    return write_prices(data_dir, tmp_path_factory.mktemp("prices"))


def test_train_with_a_ticker_the_data_lacks_exits_2_naming_the_row_and_the_ticker(prices, tmp_path, capsys):
    bad = write_membership(tmp_path, "ticker,from,to\nAAPL,2000-01-01,\nXOM,1928-10-01,2020-08-28\n")
    argv = ["train", "--data", str(prices), "--membership", str(bad), *SPLITS, "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data.membership row 2 (XOM): a member from 1928-10-01 to 2020-08-28")
    assert err.count("\n") == 1 and not (tmp_path / "run").exists()


def test_walk_forward_with_overlapping_rows_exits_2_naming_the_later_row(prices, tmp_path, capsys):
    bad = write_membership(tmp_path, "ticker,from,to\nMSFT,2010-01-01,\nAAPL,2010-01-01,\nMSFT,2019-06-01,\n")
    argv = ["walk-forward", "--data", str(prices), "--membership", str(bad), "--start", "2018-01-02"]
    argv += ["--end", "2019-12-31", "--first-test-year", "2019", "--out", str(tmp_path / "wf")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: data.membership row 3 (MSFT): overlaps row 1") and err.count("\n") == 1


def test_train_with_a_membership_file_records_it_in_the_task_and_notes_the_universe(prices, tmp_path, capsys):
    from trainer.artifacts.checkpoints import load_checkpoint

    good = write_membership(tmp_path)
    argv = ["train", "--data", str(prices), "--membership", str(good), *SPLITS, *TINY, "--json"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert any(n.startswith("point-in-time universe from members.csv") for n in summary["data"]["notes"])
    task = load_checkpoint(summary["checkpoint"])["task"]
    assert task["data"]["membership"] == str(good)
