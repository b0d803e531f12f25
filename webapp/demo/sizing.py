"""Sizing a demo run to this machine: a measured training rate turned into generation steps,
generations and a wall-clock limit (:func:`size_run`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from webapp import engine
from webapp.core.errors import AppError
from webapp.demo.profiles import GENERATION_EFFICIENCY, WALL_CLOCK_MARGIN, DemoProfile, _task_spec
from webapp.market.models import Dataset


@dataclass(frozen=True)
class Sizing:
    """A profile turned into numbers for one machine.

    Attributes:
        steps_per_s: measured training rate of one pod (the profile's algorithm) (env steps per second), or
            ``None`` when nothing was measured.
        device: the device it was measured on.
        concurrent_pods: generations trained at once (training workers, at most ``num_pods``).
        generation_steps: env steps of one generation.
        generations: generations the run may train (the env-step cap divided by the above).
        max_wall_clock_s: the budget's wall-clock limit per run (the end of training).
    """

    steps_per_s: float | None
    device: str
    concurrent_pods: int
    generation_steps: int
    generations: int
    max_wall_clock_s: int

    @property
    def env_steps(self) -> int:
        """Env steps the run may train in all (its share of the budget's env-step cap)."""
        return self.generation_steps * self.generations


def size_run(profile: DemoProfile, *, steps_per_s: float | None, device: str, training_workers: int) -> Sizing:
    """Size a demo run from a measured training rate.

    A generation trains ``GENERATION_EFFICIENCY * steps_per_s * generation_s`` env steps (the
    measured rate leaves out a generation's validation and bookkeeping), rounded down to whole
    learning chunks (:attr:`DemoProfile.rollout_batch`, at least one); the run trains as many generations as fit in ``training_s`` with
    ``min(training_workers, num_pods)`` of them at once, and at least two per pod so that every
    pod continues from the leaderboard at least once. The env-step cap (``env_steps``) ends the
    run; the wall-clock limit, ``WALL_CLOCK_MARGIN * training_s`` plus one generation, is a
    backstop that ends it first only on a machine training at less than about half the measured
    rate.

    Args:
        profile: the demo's shape.
        steps_per_s: one pod's measured rate; ``None`` uses the profile's fixed numbers.
        device: where it was measured (reported only).
        training_workers: Celery workers consuming the training (``gpu``) queue.

    Raises:
        AppError: neither a measured rate nor fixed numbers in the profile.
    """
    concurrent = max(1, min(int(training_workers), profile.num_pods))
    batch = profile.rollout_batch
    if profile.generation_steps is not None:
        gen_steps = int(profile.generation_steps)
    elif steps_per_s is not None and steps_per_s > 0:
        gen_steps = max(1, int(steps_per_s * GENERATION_EFFICIENCY * profile.generation_s) // batch) * batch
    else:
        raise AppError("the demo needs a measured training rate", fields={"steps_per_s": "required"})
    if profile.generations is not None:
        generations = int(profile.generations)
    else:
        per_generation_s = gen_steps / (steps_per_s * GENERATION_EFFICIENCY) if steps_per_s else profile.generation_s
        fit = math.floor(profile.training_s * concurrent / max(per_generation_s, 1e-9))
        generations = max(2 * profile.num_pods, fit)
    wall = int(math.ceil(WALL_CLOCK_MARGIN * profile.training_s + profile.generation_s))
    return Sizing(
        steps_per_s=steps_per_s,
        device=device,
        concurrent_pods=concurrent,
        generation_steps=gen_steps,
        generations=generations,
        max_wall_clock_s=wall,
    )


def measure_rate(
    profile: DemoProfile, dataset: Dataset, *, device: str = "auto", seconds: float = 4.0
) -> dict[str, Any]:
    """Training rate of one pod of ``profile`` (its algorithm) on ``dataset`` (see
    ``engine.measure_training_throughput``); the processed data lands in the shared cache."""
    spec = engine.validate_task(_task_spec(dataset, profile))
    engine.configure_process(threads=settings.PADDOCK_TORCH_THREADS)  # as a training worker does
    return engine.measure_training_throughput(
        spec,
        device=device,
        seconds=seconds,
        data_dir=str(settings.PADDOCK_DATA_DIR),
        cache_dir=str(settings.PADDOCK_CACHE_DIR),
    )
