"""The CLI's metric table on intraday metrics: per-bar rows say so, and the figures on session
closes are printed too (real 5-minute AAPL bars)."""

from __future__ import annotations

from trainer.backtest.metrics import compute_metrics
from trainer.cli.output import format_metrics
from trainer.data.loading import load_panel


def test_intraday_metrics_print_per_bar_labels_and_the_session_close_figures(intraday_5min_path):
    panel = load_panel(intraday_5min_path, tickers=["AAPL"])
    close = panel.set_index("date")["close"].loc["2025-01-02":"2025-12-31"]
    metrics = compute_metrics(close.pct_change().dropna())
    text = format_metrics(metrics)
    assert "daily win rate" not in text and "daily Sharpe ratio" not in text
    width = max(len(line.split("  ")[0]) for line in text.splitlines())
    rows = {line[:width].strip(): line[width:].strip() for line in text.splitlines()}
    assert rows["bar returns"] == str(metrics["num_periods"])
    assert rows["Sharpe ratio per bar"] == f"{metrics['daily_sharpe_ratio']:.3f}"
    assert "on session closes (bars compounded to each day's close)" in rows
    session = metrics["daily"]
    assert rows["session returns"] == str(session["num_days"])
    assert rows["win rate per session"] == f"{100 * session['win_rate']:.2f} %"
    # the first Sharpe row is the bars' own, the one under the session header the closes'
    sharpe_lines = [line for line in text.splitlines() if line.strip().startswith("Sharpe ratio ")]
    assert sharpe_lines[0].split()[-1] == f"{metrics['sharpe_ratio']:.3f}"
    assert sharpe_lines[-1].split()[-1] == f"{session['sharpe_ratio']:.3f}"


def test_daily_metrics_keep_their_daily_labels(data_dir):
    panel = load_panel(data_dir / "dow30_daily_eodhd_2010-01-04_2022-11-15.csv.gz", tickers=["AAPL"])
    close = panel.set_index("date")["close"].loc["2021-01-01":"2021-12-31"]
    text = format_metrics(compute_metrics(close.pct_change().dropna()))
    assert "daily win rate" in text and "daily Sharpe ratio" in text and "session" not in text
