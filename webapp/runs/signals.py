"""Signals other apps connect to (in their ``AppConfig.ready``), so the runs app never imports
them: the reports app queues end-of-run backtests on :data:`run_finished`."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent after the transaction that marks a run ``finished`` commits; keyword ``run_id`` (int).
#: Receivers must not raise (``send_robust`` logs what they raise and goes on).
run_finished = Signal()
