"""How the studies app reacts to other apps' signals (connected in ``StudiesConfig.ready``)."""

from __future__ import annotations

import logging

from webapp.studies import services
from webapp.studies.tasks import stitch_study

logger = logging.getLogger(__name__)


def check_study_of_run(sender, *, run_id: int, **kwargs) -> None:
    """On ``webapp.runs.signals.run_ended``: when the run is a study's last fold to end, queue
    ``stitch_study`` for it (a broker outage is logged; the study stays ``running``)."""
    study_id = services.study_ready_to_stitch(run_id=run_id)
    if study_id is None:
        return
    try:
        stitch_study.delay(study_id)
    except Exception:
        logger.warning("could not queue the stitching of study %s", study_id, exc_info=True)
