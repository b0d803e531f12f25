"""Celery entry points of the studies app (ids in, services do the work), on the ``cpu`` queue."""

from __future__ import annotations

import logging
import traceback

from celery import shared_task

from webapp.studies import services
from webapp.studies.models import Study

logger = logging.getLogger(__name__)


@shared_task(name="webapp.studies.tasks.stitch_study", acks_late=True, reject_on_worker_lost=True)
def stitch_study(study_id: int) -> str:
    """Stitch study ``study_id``'s record once every fold run has ended; anything unexpected
    fails the study with a short note (logged with its traceback). Returns its status."""
    try:
        return services.study_stitch(study_id=study_id)
    except Exception:
        logger.exception("stitching study %s crashed", study_id)
        Study.objects.filter(pk=study_id, status=Study.Status.STITCHING).update(
            status=Study.Status.FAILED,
            error="internal error (logged): " + traceback.format_exc(limit=1).splitlines()[-1],
        )
        return Study.Status.FAILED
