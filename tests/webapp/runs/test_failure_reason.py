"""What a user reads when a generation crashes: one line naming the cause, never a traceback
(the traceback is in the worker log)."""

from __future__ import annotations

import logging

import pytest

from webapp import engine
from webapp.runs import services, tasks
from webapp.runs.models import Generation, Run

pytestmark = pytest.mark.django_db

# What PyTorch raises for hidden_sizes [100000, 100000, 100000] on a CPU worker.
OOM = (
    "[enforce fail at alloc_cpu.cpp:117] data.\n"
    "DefaultCPUAllocator: can't allocate memory: you tried to allocate 40000000000 bytes. Error code 12"
)


def _crash(*args, **kwargs):
    def inner():
        raise RuntimeError(OOM)

    inner()  # a frame of its own, so there is a real traceback


def test_a_crashed_run_says_why_in_one_line_and_keeps_the_traceback_in_the_log(
    make_budget, make_run, monkeypatch, caplog
):
    monkeypatch.setattr(engine, "train_generation", _crash)
    run = services.run_start(run=make_run(make_budget(), num_pods=1))
    gen = Generation.objects.get(run=run)
    with caplog.at_level(logging.ERROR, logger="webapp.runs.tasks"):
        for _ in range(services.MAX_ATTEMPTS):  # a crash is retried, then fails the run
            tasks.train_generation_task(gen.id)
    run.refresh_from_db()
    gen.refresh_from_db()
    cause = "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 40000000000 bytes."
    assert run.status == Run.Status.FAILED
    assert run.status_reason.startswith(f"generation 1 of pod 0 failed: {cause}")
    assert gen.error.startswith(cause)
    for text in (run.status_reason, gen.error):
        assert "Traceback" not in text and "\n" not in text
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records), "the log keeps the traceback"


def test_a_long_or_empty_message_still_gives_a_short_reason():
    assert tasks.failure_reason(KeyError()) == "KeyError"
    long = tasks.failure_reason(ValueError("x" * 1000))
    assert long.startswith("ValueError: xxx") and len(long) <= 300
