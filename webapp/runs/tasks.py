"""Celery entry points of the runs app (thin: ids in, services do the work).

``train_generation_task`` (registered as ``webapp.runs.tasks.run_generation``, queue ``gpu``,
``acks_late`` + ``reject_on_worker_lost`` from settings) trains one generation; the function is
not called ``run_generation`` so that the name means ``trainer.pod.run_generation`` alone, while
the registered name stays, so messages already in the broker (and the routes, the sweep's task
ids and the logs they match) still reach it; the tasks are bound to the project's Celery app explicitly, so any
process that imports them (web, tests, benchmarks) sends to the configured broker; ``reap_stale_generations`` (queue ``cpu``, periodic through beat)
re-queues generations of dead workers and re-sends lost messages.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from webapp import engine
from webapp.config.celery import app
from webapp.core import db, workers
from webapp.runs import events, services
from webapp.runs.services import telemetry

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY_S = 1.0
STOP_CHECK_EVERY_S = 1.0


class _Attempt:
    """Callbacks of one claimed generation: throttled heartbeats, progress events and the
    ``should_stop`` signal (run stopped, or the row reaped and claimed by someone else).

    A dropped database connection does not end the attempt: the heartbeat and the stop check
    retry once on a new connection (:func:`webapp.core.db.on_fresh_connection`). Once a
    heartbeat or stop check says the claim is lost, the attempt publishes nothing more: the
    generation is another attempt's, or its run ended.
    """

    def __init__(self, claim: services.Claim) -> None:
        self.claim = claim
        self.lost = False
        self._last_heartbeat = 0.0
        self._last_event = 0.0
        self._last_check = time.monotonic()
        self._stop = False

    def heartbeat(self, **fields: Any) -> None:
        self._last_heartbeat = time.monotonic()
        if not db.on_fresh_connection(
            services.generation_heartbeat, generation_id=self.claim.generation_id, attempt=self.claim.attempt, **fields
        ):
            self.lost = True

    def progress(self, info: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - self._last_heartbeat >= HEARTBEAT_EVERY_S:
            self.heartbeat(env_steps=int(info.get("env_steps", 0)), steps_per_s=float(info.get("steps_per_s", 0.0)))
        if self.lost or self._stop:
            return  # superseded or stopped: the run's events are no longer this attempt's to send
        if now - self._last_event >= 1.0 / events.PROGRESS_PER_S:
            self._last_event = now
            try:
                services.generation_progress_event(claim=self.claim, info=info)
            except Exception:  # a progress event is never worth failing a generation
                logger.warning("progress event failed", exc_info=True, extra={"run": self.claim.run_id})

    def telemetry(self, point: dict[str, Any]) -> None:
        if self.lost or self._stop:
            return  # the live curve is the current attempt's to send
        try:
            telemetry.point_record(
                run_id=self.claim.run_id,
                generation_id=self.claim.generation_id,
                attempt=self.claim.attempt,
                pod_index=self.claim.pod_index,
                point=point,
            )
        except Exception:  # the full curve is stored with the result; a lost live point is not worth a failure
            logger.warning("telemetry point failed", exc_info=True, extra={"run": self.claim.run_id})

    def should_stop(self) -> bool:
        now = time.monotonic()
        if self.lost or self._stop:
            return True
        if now - self._last_check >= STOP_CHECK_EVERY_S:
            self._last_check = now
            self._stop = not db.on_fresh_connection(
                services.generation_still_mine, generation_id=self.claim.generation_id, attempt=self.claim.attempt
            )
            if now - self._last_heartbeat >= HEARTBEAT_EVERY_S:
                self.heartbeat()
        return self._stop or self.lost


@app.task(name="webapp.runs.tasks.run_generation", bind=True, acks_late=True, reject_on_worker_lost=True)
def train_generation_task(self, generation_id: int) -> None:
    """Claim generation ``generation_id`` and train it; a no-op if it is not claimable."""
    worker = getattr(self.request, "hostname", None) or socket.gethostname()
    claim = services.generation_claim(generation_id=generation_id, worker=worker)
    if claim is None:
        return
    log = {"run": claim.run_id, "pod": claim.pod_index}
    attempt = _Attempt(claim)
    try:
        device = engine.resolve_device(claim.device, workers.worker_device())
        attempt.heartbeat(device=workers.device_label(device, workers.physical_gpus()))
        _injected_fault()
        with tempfile.TemporaryDirectory(prefix="paddock-gen-") as tmp:
            parent_path = None
            if claim.parent_checkpoint:
                parent_path = str(
                    services.local_copy_of_checkpoint(
                        claim.parent_checkpoint, Path(tmp) / "parent.pt", expected_sha256=claim.parent_sha256
                    )
                )
            out_path = Path(tmp) / "agent.pt"
            result = engine.train_generation(
                claim.task,
                env_steps=claim.env_steps,
                out_path=str(out_path),
                parent_path=parent_path,
                hyperparameters=claim.hyperparameters,
                seed=claim.seed,
                device=device,
                progress=attempt.progress,
                should_stop=attempt.should_stop,
                telemetry=attempt.telemetry,
                data_dir=str(settings.PADDOCK_DATA_DIR),
                cache_dir=str(settings.PADDOCK_CACHE_DIR),
                benchmark_path=str(settings.PADDOCK_BENCHMARK_FILE),
            )
            agent = db.on_fresh_connection(
                services.generation_complete,
                claim=claim,
                result=result,
                local_checkpoint=str(out_path) if out_path.exists() else None,
            )
        if agent is not None:
            logger.info("generation %s done (score %s, agent %s)", claim.number, result.score, agent.pk, extra=log)
        elif services.generation_superseded(generation_id=claim.generation_id, attempt=claim.attempt):
            logger.warning(
                "generation %s attempt %s: result discarded (the generation was reaped and is another attempt's)",
                claim.number,
                claim.attempt,
                extra=log,
            )
        else:
            logger.info("generation %s cancelled after %s env steps", claim.number, result.env_steps, extra=log)
    except engine.Diverged as exc:
        # permanent, but for this generation only: not retried, the run goes on
        env_steps = int((exc.details.get("stats") or {}).get("env_steps") or 0)
        logger.warning("generation %s diverged: %s", claim.number, exc.message, extra=log)
        db.on_fresh_connection(services.generation_diverged, claim=claim, error=exc.message, env_steps=env_steps)
    except engine.TrainerError as exc:
        logger.warning("generation %s failed: %s", claim.number, exc.message, extra=log)
        db.on_fresh_connection(services.generation_fail, claim=claim, error=exc.message, retry=False)
    except SoftTimeLimitExceeded:
        db.on_fresh_connection(
            services.generation_fail,
            claim=claim,
            error=f"time limit of {settings.PADDOCK_GENERATION_TIME_LIMIT} s exceeded",
            retry=False,
        )
    except db.CONNECTION_ERRORS as exc:
        # The database went away twice in a row (the heartbeat already retried once): queue the
        # generation again at once, on a new connection, without counting an attempt.
        logger.warning("generation %s: database connection lost; queued again", claim.number, extra=log)
        db.discard_connection()
        db.on_fresh_connection(
            services.generation_fail, claim=claim, error=failure_reason(exc), retry=True, count_attempt=False
        )
    except Exception as exc:
        # The traceback goes to the worker log only; users see the one-line reason.
        logger.exception("generation %s crashed", claim.number, extra=log)
        db.on_fresh_connection(services.generation_fail, claim=claim, error=failure_reason(exc), retry=True)
        if engine.is_sticky_device_error(exc):
            _end_poisoned_process(claim.number, exc)


def _end_poisoned_process(number: Any, exc: BaseException) -> None:
    """End this pool process after a CUDA error that broke its CUDA context: every later
    generation here would fail the same way. The attempt is already recorded (and queued again
    while attempts remain); Celery's pool starts a fresh process in its place, and the message
    (``acks_late`` + ``reject_on_worker_lost``) comes back to a claim that is no longer open."""
    logger.error(
        "generation %s: %s broke this process's CUDA context; ending pool process %s (Celery starts a fresh one)",
        number,
        failure_reason(exc),
        os.getpid(),
    )
    logging.shutdown()
    os._exit(70)  # EX_SOFTWARE; no cleanup that could touch CUDA again


def _injected_fault() -> None:
    """Tests only: when the file named by ``PADDOCK_TEST_FAULT_FILE`` holds ``sticky-cuda``, the
    next generation overwrites it with its pool process id and raises the RuntimeError that a
    sticky CUDA error raises (``tests/webapp/runs/test_worker_cuda_health.py``)."""
    path = os.environ.get("PADDOCK_TEST_FAULT_FILE")
    if not path or not os.path.exists(path) or Path(path).read_text().strip() != "sticky-cuda":
        return
    Path(path).write_text(str(os.getpid()))
    raise RuntimeError(
        "CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call (injected by a test)"
    )


def failure_reason(exc: BaseException, *, limit: int = 300) -> str:
    """One line for users saying why a generation crashed: the exception type and the last
    non-empty line of its message (where PyTorch puts the cause, e.g. "DefaultCPUAllocator:
    can't allocate memory: you tried to allocate 40000000000 bytes"), at most ``limit`` chars."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


@app.task(name="webapp.runs.tasks.reap_orphaned_generations", ignore_result=True)
def reap_orphaned_generations() -> dict[str, int]:
    """Periodic (every 5 s): re-queue at once the generations of workers known to be gone
    (their Redis heartbeat expired), so a killed worker's budget share is free in seconds."""
    return {"reaped": len(services.generations_reap_orphaned())}


@app.task(name="webapp.runs.tasks.reap_stale_generations", ignore_result=True)
def reap_stale_generations() -> dict[str, int]:
    """Periodic: re-queue generations of dead workers, re-send lost messages, give idle pods
    work and finish runs whose budget is spent."""
    reaped = services.generations_reap_stale()
    sent = services.runs_ensure_work()
    return {"reaped": len(reaped), "sent": sent}
