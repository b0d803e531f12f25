"""Signals other apps connect to (in their ``AppConfig.ready``), so the runs app never imports
them: the reports app queues end-of-run backtests on :data:`run_ended`."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent after the transaction that ends a run commits (the budget finished it, or its user
#: stopped it); keywords ``run_id`` (int) and ``backtest`` (bool: the run's best agents should
#: be backtested on its test split: always for a finished run, on request for a stopped one).
#: Receivers must not raise (``send_robust`` logs what they raise and goes on).
run_ended = Signal()
