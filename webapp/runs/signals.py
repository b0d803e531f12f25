"""Signals other apps connect to (in their ``AppConfig.ready``), so the runs app never imports
them: the reports app queues end-of-run backtests on :data:`run_ended` and answers
:data:`agent_test_metrics` for the model card."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent after the transaction that ends a run commits (the budget finished it, or its user
#: stopped it); keywords ``run_id`` (int) and ``backtest`` (bool: the run's best agents should
#: be backtested on its test split: always for a finished run, on request for a stopped one).
#: Receivers must not raise (``send_robust`` logs what they raise and goes on).
run_ended = Signal()

#: Sent (``send_robust``) when an agent's bundle is exported; keyword ``agent`` (the Agent).
#: A receiver returns the agent's latest finished backtest over its task's test split as
#: ``{"backtest_id", "start", "end", "agent": {...}, "QQQ": {...}, "equal_weight": {...}}``, or
#: ``None``; the model card shows the first answer.
agent_test_metrics = Signal()
