"""``manage.py demo_setup``: import the demo data, size and start the demo run, print its page.

``./paddock demo`` runs it once the stack is healthy (it needs the Celery workers: it asks
them which device they train on). See :mod:`webapp.demo` for what it creates and why it
can be run again safely.
"""

from __future__ import annotations

import dataclasses
import os
import time

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.urls import reverse

from webapp import engine
from webapp.core.errors import AppError
from webapp.demo.data import import_demo_dataset, import_intraday_dataset
from webapp.demo.launch import active_demo_run, start_demo_run
from webapp.demo.profiles import (
    BENCHMARK_TICKER,
    CPU_PROFILE,
    DEMO_KIND,
    DEMO_USERNAME,
    GENERATION_EFFICIENCY,
    GPU_PROFILE,
    INTRADAY_CPU_PROFILE,
    INTRADAY_GPU_PROFILE,
    demo_algorithm,
    with_benchmark_budget,
)
from webapp.demo.sizing import measure_rate, size_run

DEFAULT_BASE_URL = "http://127.0.0.1:8000/"


def _training_workers() -> tuple[int, str]:
    """How many Celery workers consume the training queue, and the device they train on
    (``"cuda"`` when any reports a GPU, else ``"cpu"``). ``(0, "cpu")`` when none answers."""
    from webapp.core.health import check_workers

    report = check_workers()
    workers = [w for w in report.get("workers", []) if "gpu" in w.get("queues", [])]
    on_gpu = any(str(w.get("device", "")).startswith("cuda") for w in workers)
    return len(workers), "cuda" if on_gpu else "cpu"


def _demo_password() -> str | None:
    from webapp.demo.management.commands.demo_account import _demo_password as password

    try:
        return password()
    except OSError:
        return None


class Command(BaseCommand):
    help = "Import the Dow-30 demo data, create the demo budget and start (or reuse) the demo run."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default=DEMO_USERNAME, help="owner of the demo (default: demo)")
        parser.add_argument(
            "--device",
            choices=("auto", "cpu", "cuda"),
            default="auto",
            help="size for this device (default: what the training workers report)",
        )
        parser.add_argument(
            "--measure-seconds", type=float, default=4.0, help="seconds of training to measure (default 4)"
        )
        parser.add_argument("--new-run", action="store_true", help="start a new run even if a demo run is going")
        parser.add_argument(
            "--kind",
            choices=("portfolio", "stock_trading"),
            default=DEMO_KIND,
            help="task kind (default portfolio: target weights over the 29 stocks and cash, starting at equal weight)",
        )
        parser.add_argument(
            "--algorithm",
            choices=engine.algorithms(),
            default=None,
            help="algorithm to train (default: the kind's default, direct for the daily portfolio demo "
            "(docs/default-selection.md), ppo for stock trading and the intraday demo); its speed sizes the run",
        )
        parser.add_argument(
            "--intraday",
            action="store_true",
            help="the 5-minute demo: AAPL, MSFT, NVDA bars 2024-03..2026-08 with QQQ's bars as the benchmark "
            "(train 2024-03..2025-06, validation 2025-07..2025-12, test 2026-01..2026-08)",
        )
        parser.add_argument("--no-download", action="store_true", help="never download absent data files")
        parser.add_argument(
            "--base-url", default=None, help="site URL for the printed link (default $PADDOCK_BASE_URL)"
        )

    def say(self, line: str) -> None:
        self.stdout.write(f"demo: {line}")
        self.stdout.flush()

    def handle(self, *args, **options) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user {options['username']!r}; run `manage.py demo_account` first")
        base = options["base_url"] or os.environ.get("PADDOCK_BASE_URL")
        try:
            run, reused = self._setup(user, options)
        except AppError as exc:
            raise CommandError(exc.message) from None
        url = (base or DEFAULT_BASE_URL).rstrip("/") + reverse("runs:detail", args=[run.pk])
        self.say(f"live run page: {url}" + ("  (the demo run already going)" if reused else ""))
        if not base:
            # Run by hand, the command cannot know where the site listens.
            self.say(
                f"  (that assumes the site at {DEFAULT_BASE_URL}, `./paddock demo`'s default; on another "
                "address pass --base-url or set PADDOCK_BASE_URL, e.g. http://127.0.0.1:8080/)"
            )
        password = _demo_password() if user.username == DEMO_USERNAME else None
        if password:
            self.say(f"login: username {user.username}  password {password}")
        else:
            self.say(f"login: username {user.username}")

    def _setup(self, user, options):
        started = time.monotonic()
        intraday = options["intraday"]
        if intraday:
            dataset, created = import_intraday_dataset(user, say=self.say)
        else:
            dataset, created = import_demo_dataset(user, say=self.say, allow_download=not options["no_download"])
        self.say(
            f"dataset {dataset.name!r} {'created' if created else 'already there'}: {len(dataset.tickers)} tickers, "
            f"{dataset.start_date} to {dataset.end_date}, benchmark {BENCHMARK_TICKER}"
            + (" (its 5-minute bars in the same file)" if intraday else "")
        )
        for note in dataset.notes:
            if "dropped" in note:
                self.say(f"  note: {note}")

        if not options["new_run"]:
            active = active_demo_run(user, intraday=intraday)
            if active is not None:
                return active, True

        workers, worker_device = _training_workers()
        device = worker_device if options["device"] == "auto" else options["device"]
        if intraday:
            profile = INTRADAY_GPU_PROFILE if device == "cuda" else INTRADAY_CPU_PROFILE
        else:
            profile = GPU_PROFILE if device == "cuda" else CPU_PROFILE
        algorithm = options["algorithm"] or demo_algorithm(options["kind"], intraday=intraday)
        profile = with_benchmark_budget(dataclasses.replace(profile, kind=options["kind"], algorithm=algorithm))
        envs = profile.hyperparameters.get("num_envs") or engine.default_hyperparameters(profile.algorithm)["num_envs"]
        self.say(
            f"measuring {profile.algorithm.upper()} training speed on {device} for {options['measure_seconds']:g} s "
            f"({envs} envs, {len(dataset.tickers)} tickers)"
        )
        rate = measure_rate(profile, dataset, device=device, seconds=options["measure_seconds"])
        sizing = size_run(
            profile, steps_per_s=rate["steps_per_s"], device=rate["device"], training_workers=max(workers, 1)
        )
        self.say(
            f"{rate['steps_per_s']:,.0f} env steps/s on {rate['device']}; {max(workers, 1)} training worker(s): "
            f"generations of {sizing.generation_steps:,} env steps "
            f"(~{sizing.generation_steps / max(rate['steps_per_s'] * GENERATION_EFFICIENCY, 1e-9):.0f} s), "
            f"{sizing.generations} generations ({sizing.env_steps:,} env steps) within {sizing.max_wall_clock_s} s"
        )
        if options["new_run"]:
            active = active_demo_run(user, intraday=intraday)
            if active is not None:
                from webapp.runs import services

                services.run_stop(run=active)
                self.say(f"stopped the previous demo run #{active.pk}")
        run, budget = start_demo_run(user, dataset, profile, sizing)
        splits = profile.splits
        self.say(
            f"run #{run.pk} started: {run.num_pods} pods, {profile.algorithm.upper()}, train {splits['train'][0]}..{splits['train'][1]}, "
            f"validation {splits['validation'][0]}..{splits['validation'][1]}, test {splits['test'][0]}..{splits['test'][1]}; budget {budget.name!r} "
            f"(env-step cap {budget.env_step_cap:,}, {budget.max_wall_clock_s} s per run); "
            f"set up in {time.monotonic() - started:.0f} s"
        )
        self.say(
            "when the budget is spent the best agents are backtested against QQQ on the test dates"
            + (" (QQQ's 5-minute bars)" if intraday else "")
        )
        return run, False
