"""Writes of the runs app, one concept per module:

- :mod:`.budgets`: budgets, :func:`budget_verdict` (the one "is the budget spent?" rule) and
  dispatching queued generations into free slots;
- :mod:`.quotas`: budgets of one's own within a quota, ending budgets, staff setting quotas;
- :mod:`.seeds`: one configuration run with several seeds (a seed group);
- :mod:`.task_create`: creating tasks;
- :mod:`.lifecycle`: create, start, pause, resume, stop, scale and finish runs;
- :mod:`.generations`: the generation protocol below, worker side (claim, heartbeat, progress);
- :mod:`.results`: what a finished attempt leaves (agent, leaderboard, usage, next generation;
  divergence and failure);
- :mod:`.housekeeping`: the periodic sweeps (dead workers, lost messages);
- :mod:`.storage`: checkpoint copies and agent bundles in the default storage;
- :mod:`.archive`: tags, notes, archiving and deleting runs;
- :mod:`.ensembles`: building and recording an ensemble of a run's leaderboard;
- :mod:`.telemetry`: storing training-curve points;
- :mod:`.common`: settings, limits, the row locks and the events they publish (payloads built
  by :mod:`webapp.runs.selectors.payloads` after the transaction commits, never under a lock).

Every read a page, the API or a live event needs is in :mod:`webapp.runs.selectors` (which never
imports this package).

Generation protocol (one Celery task per generation, ids only, see ``webapp/runs/tasks.py``):

1. A generation row is created ``queued`` with ``dispatched_at = NULL``.
   :func:`budget_dispatch` sends task messages for the oldest undispatched queued generations
   of a budget, as many as it has free slots, and stamps ``dispatched_at``.
2. :func:`generation_claim` locks the budget row (``select_for_update``), checks the run, the
   budget's verdict and free slots, picks the parent (``trainer.tournament``) and claims the
   row with a conditional update ``filter(id=..., status__in=(queued, stale)).update(status=
   running, attempt=attempt + 1)``. Zero rows updated means another delivery has it: a no-op.
   A generation that must wait for a slot gets ``dispatched_at = NULL`` again, so the next
   finishing generation of the budget dispatches it.
3. :func:`generation_complete` stores the agent, prunes the leaderboard, accounts usage and
   queues the pod's next generation in ONE transaction, and only if the row is still
   ``running`` with the same ``attempt`` (a late copy of a reaped generation is discarded).
4. :func:`generations_reap_stale` marks running generations whose heartbeat is too old
   ``stale`` and sends them again (:func:`generations_reap_orphaned` at once for a worker
   known to be gone: its Redis heartbeat key expired); :func:`runs_ensure_work` re-sends queued generations whose
   message was lost (Redis restart) and gives idle pods of running runs a generation.

Lock order, everywhere two rows are written: budget row first, then run, generations, pods
(:func:`webapp.runs.services.common.lock_budget_and_run`; each lock site says so).
"""

from webapp.runs.services.budgets import (
    BUDGET_EDITABLE,
    BudgetVerdict,
    budget_create,
    budget_dispatch,
    budget_errors,
    budget_update,
    budget_verdict,
)
from webapp.runs.services.common import (
    DEFAULT_GENERATION_STEPS,
    DIRECT_GENERATION_STEPS,
    LOST_MESSAGE_AFTER_S,
    MAX_ATTEMPTS,
    PAUSE_AFTER_FAILURES,
    default_generation_steps,
    redispatch_after_s,
    stale_after_s,
)
from webapp.runs.services.generations import (
    Claim,
    checkpoint_name,
    generation_claim,
    generation_heartbeat,
    generation_progress_event,
    generation_still_mine,
    generation_superseded,
)
from webapp.runs.services.housekeeping import generations_reap_orphaned, generations_reap_stale, runs_ensure_work
from webapp.runs.services.lifecycle import (
    run_create,
    run_pause,
    run_resume,
    run_scale,
    run_settings_errors,
    run_start,
    run_stop,
)
from webapp.runs.services.quotas import budget_change, budget_create_own, budget_end, quota_set
from webapp.runs.services.results import generation_complete, generation_diverged, generation_fail
from webapp.runs.services.seeds import runs_create_seeds, runs_create_with_task, runs_start
from webapp.runs.services.storage import Bundle, agent_bundle, local_copy_of_checkpoint
from webapp.runs.services.task_create import task_create, task_prepare
from webapp.runs.services.trials import trial_record

__all__ = [
    "BUDGET_EDITABLE",
    "DEFAULT_GENERATION_STEPS",
    "DIRECT_GENERATION_STEPS",
    "default_generation_steps",
    "MAX_ATTEMPTS",
    "LOST_MESSAGE_AFTER_S",
    "PAUSE_AFTER_FAILURES",
    "Bundle",
    "BudgetVerdict",
    "Claim",
    "agent_bundle",
    "budget_change",
    "budget_create",
    "budget_create_own",
    "budget_end",
    "budget_errors",
    "budget_dispatch",
    "budget_update",
    "budget_verdict",
    "checkpoint_name",
    "generation_claim",
    "generation_complete",
    "generation_diverged",
    "generation_fail",
    "generation_heartbeat",
    "generation_progress_event",
    "generation_still_mine",
    "generation_superseded",
    "generations_reap_orphaned",
    "generations_reap_stale",
    "local_copy_of_checkpoint",
    "redispatch_after_s",
    "quota_set",
    "run_create",
    "run_pause",
    "run_resume",
    "run_scale",
    "run_settings_errors",
    "run_start",
    "run_stop",
    "runs_create_seeds",
    "runs_create_with_task",
    "runs_ensure_work",
    "runs_start",
    "stale_after_s",
    "task_create",
    "task_prepare",
    "trial_record",
]
