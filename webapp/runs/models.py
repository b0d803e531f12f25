"""Training runs: budgets, tasks, runs, pods, generations and the agents they produce.

A :class:`Run` trains a tournament-based ensemble (ElegantRL-Podracer, Liu et al. 2021, arXiv 2112.05923): its
training pool has ``num_pods`` :class:`Pod` slots; each pod runs one :class:`Generation` at a
time (a Celery task on a GPU worker) that trains an agent for ``generation_steps`` env steps,
scores it on the validation window and submits it as an :class:`Agent` to the run's leaderboard
(the ``leaderboard_size`` best agents, ``on_leaderboard=True``). Several runs may draw on one
:class:`ClusterBudget`, which caps concurrent generations and total GPU time / env steps.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from webapp.core.lookups import JSONListHas
from webapp.runs.scoring import score_rule


class ClusterBudget(models.Model):
    """The compute a group of runs may use.

    Limits (``None`` = unlimited): ``max_concurrent_pods`` generations running at once across
    every run on the budget (one GPU each); ``gpu_hours_cap`` total GPU time, accounted from
    the real wall-clock duration of each generation; ``max_wall_clock_s`` seconds per run from
    its start; ``deadline`` an absolute UTC time after which no generation starts;
    ``env_step_cap`` total environment steps.

    Usage counters (``gpu_seconds_used``, ``env_steps_used``) only grow, inside the transaction
    that stores a generation's result. Pods running now are counted from ``Generation`` rows
    (``selectors.budgets.budget_usage``) so they can never drift.
    """

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budgets")
    max_concurrent_pods = models.PositiveIntegerField(default=1)
    gpu_hours_cap = models.FloatField(null=True, blank=True)
    max_wall_clock_s = models.PositiveIntegerField(null=True, blank=True)
    deadline = models.DateTimeField(null=True, blank=True)
    env_step_cap = models.BigIntegerField(null=True, blank=True)
    gpu_seconds_used = models.FloatField(default=0.0)
    env_steps_used = models.BigIntegerField(default=0)
    purpose = models.CharField(
        max_length=10,
        choices=[("assigned", "Assigned by staff"), ("own", "Your own (within your quota)"), ("demo", "The demo's")],
        default="assigned",
        help_text="own budgets count against their owner's quota (``BudgetQuota``); assigned and demo ones do not",
    )
    ended_at = models.DateTimeField(null=True, blank=True, help_text="ended by its owner: no generation starts")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.CheckConstraint(condition=Q(max_concurrent_pods__gte=1), name="budget_pods_gte_1")]

    def __str__(self) -> str:
        return self.name


class BudgetQuota(models.Model):
    """How much a user may hold in budgets of their own (``ClusterBudget.purpose == "own"``)
    at once: the device-hours caps and the pods at once of their open own budgets add up to at
    most these. ``None`` takes the default of the settings (``PADDOCK_QUOTA_DEVICE_HOURS``,
    ``PADDOCK_QUOTA_PODS``); staff raise a user's quota on the Budgets page or in the admin."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="budget_quota")
    device_hours = models.FloatField(null=True, blank=True, help_text="device hours held at once; empty = default")
    max_concurrent_pods = models.PositiveIntegerField(null=True, blank=True, help_text="pods at once; empty = default")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"quota of {self.user}"


class Task(models.Model):
    """What to learn: data, splits, env parameters, algorithm and hyperparameters.

    Every JSON field holds the normalized form returned by ``engine.validate_task`` (the
    trainer's own config classes validate it), so a stored task always builds a ``TaskSpec``.
    ``splits`` is ``{"train": {"start", "end"}, "validation": {...}, "test": {...}}`` with
    ``YYYY-MM-DD`` inclusive bounds.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=200)
    dataset = models.ForeignKey("market.Dataset", on_delete=models.PROTECT, related_name="tasks")
    tickers = models.JSONField(default=list)
    splits = models.JSONField(default=dict)
    env = models.JSONField(default=dict)
    kind = models.CharField(
        max_length=20,
        choices=[("stock_trading", "Stock trading"), ("portfolio", "Portfolio allocation")],
        default="stock_trading",
    )
    selection = models.JSONField(default=dict, blank=True, help_text="validation scoring rule; {} = the default")
    algorithm = models.CharField(max_length=20)
    hyperparameters = models.JSONField(default=dict)
    algorithms = models.JSONField(
        default=list,
        blank=True,
        help_text="the algorithms a run's fresh pods may train, ``algorithm`` first; [] = only ``algorithm``",
    )
    algorithm_hyperparameters = models.JSONField(
        default=dict,
        blank=True,
        help_text="{algorithm: full hyperparameters} of each allowed algorithm but ``algorithm`` (whose are "
        "``hyperparameters``); an algorithm missing here takes the shared values of ``hyperparameters``",
    )
    data_notes = models.JSONField(
        default=list,
        blank=True,
        help_text="what the data pipeline decided for the task's range (dropped tickers, filled days, warm-up, "
        "adjusted or raw prices), one line each",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """One tournament: a pool of pods training on a task within a budget.

    Status flow: ``queued`` -> ``running`` <-> ``paused``; ``running``/``paused`` ->
    ``finishing`` (the budget or a limit is spent; running generations end) -> ``finished``
    (then the end-of-run backtests); ``cancelled`` (stopped by its user: at once, running
    generations never enter the leaderboard, backtests only when the user asked) and
    ``failed`` are terminal too.

    ``event_seq`` numbers the events sent to the run's Channels group (see ``events.py``).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        PAUSED = "paused"
        FINISHING = "finishing"
        FINISHED = "finished"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE = (Status.RUNNING, Status.PAUSED, Status.FINISHING)
    TERMINAL = (Status.FINISHED, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="runs")
    budget = models.ForeignKey(ClusterBudget, on_delete=models.PROTECT, related_name="runs")
    num_pods = models.PositiveIntegerField(default=2)
    generation_steps = models.PositiveIntegerField(help_text="env steps trained per generation")
    leaderboard_size = models.PositiveIntegerField(default=5)
    fresh_probability = models.FloatField(default=0.1, help_text="chance a generation starts from scratch")
    mutation = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"factors": [0.8, 1.25], "bounds": {"learning_rate": [1e-5, 1e-2], ...}}; '
        "the hyperparameters named in bounds are mutated",
    )
    score_metric = models.CharField(max_length=40, default="sharpe")
    seed_group = models.CharField(
        max_length=32,
        blank=True,
        default="",
        db_index=True,
        help_text="runs of one configuration made with several seeds share it (empty: a run on its own)",
    )
    provenance = models.JSONField(
        default=dict,
        blank=True,
        help_text="what the run was created with: code_version (git commit or package version), packages "
        "(python, torch, numpy), data_sha256 (the dataset's files), seed",
    )
    seed = models.PositiveIntegerField(default=0)
    device = models.CharField(max_length=20, default="auto")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.QUEUED)
    status_reason = models.CharField(max_length=300, blank=True)
    backtest_error = models.TextField(
        blank=True, help_text="why the end-of-run backtests could not run (empty when they could)"
    )
    stop_requested = models.BooleanField(default=False, help_text="cancel running generations (user stop)")
    event_seq = models.BigIntegerField(default=0)
    best_score = models.FloatField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True, help_text="the owner's labels, lower case")
    note = models.TextField(blank=True, help_text="the owner's note")
    archived = models.BooleanField(default=False, help_text="hidden from the runs list unless asked for")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(num_pods__gte=0), name="run_pods_gte_0"),
            models.CheckConstraint(condition=Q(leaderboard_size__gte=1), name="run_k_gte_1"),
        ]
        # The runs list (``selectors.runs.run_list``): a user's runs newest first, optionally of one
        # status; both read in index order, no sort.
        indexes = [
            models.Index(fields=["owner", "-created_at", "-id"], name="runs_run_owner_created"),
            models.Index(fields=["owner", "status", "-created_at", "-id"], name="runs_run_owner_status_created"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def score_rule(self) -> dict:
        """The rule the run's scores follow, with its label (``scoring.score_rule`` of the
        task's ``selection``): the stored ``score_metric`` only names the quantity it is built on
        (the API's ``score_metric`` is this rule's name)."""
        return score_rule(self.task.selection)


# ``Run.objects.filter(tags__list_has="keep")``: the same query on SQLite and PostgreSQL (Django's
# ``tags__contains`` exists on PostgreSQL only).
Run._meta.get_field("tags").register_lookup(JSONListHas)


class Pod(models.Model):
    """A slot of a run's training pool; runs one generation at a time.

    ``state``: ``idle`` (no generation yet or between them), ``queued`` (waiting for a worker
    or a budget slot), ``training``, ``retired`` (scaled away), ``stopped`` (run over).
    """

    class State(models.TextChoices):
        IDLE = "idle"
        QUEUED = "queued"
        TRAINING = "training"
        RETIRED = "retired"
        STOPPED = "stopped"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="pods")
    index = models.PositiveIntegerField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.IDLE)
    current_agent = models.ForeignKey(
        "Agent", on_delete=models.SET_NULL, null=True, blank=True, related_name="+", help_text="last agent it trained"
    )
    generations_done = models.PositiveIntegerField(default=0)
    env_steps = models.BigIntegerField(default=0, help_text="env steps of the current generation so far")
    steps_per_s = models.FloatField(default=0.0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="runs_pod_run_index_unique")]

    def __str__(self) -> str:
        return f"run {self.run_id} pod {self.index}"


class Generation(models.Model):
    """One pod's training of one agent for ``env_steps`` steps.

    Status flow: ``queued`` -> ``running`` -> ``done`` | ``failed`` | ``cancelled``. A running
    generation whose ``heartbeat_at`` is too old (worker killed) is marked ``stale`` by the
    reaper and may be claimed again; ``attempt`` counts claims, and only the attempt that holds
    the row may store a result.

    ``failure`` names a failure of this generation alone, after which its pod and run go on
    (``diverged``: training produced NaN/inf, a permanent failure never retried); it is empty
    for other outcomes, including failures that end the run (``Run.status_reason`` says why).
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        STALE = "stale"

    class Failure(models.TextChoices):
        NONE = "", "none"
        DIVERGED = "diverged", "diverged"

    OPEN = (Status.QUEUED, Status.RUNNING, Status.STALE)
    CLAIMABLE = (Status.QUEUED, Status.STALE)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="generations")
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="generations")
    number = models.PositiveIntegerField(help_text="1-based, per pod")
    parent = models.ForeignKey("Agent", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    algorithm = models.CharField(max_length=20, blank=True, help_text="set when claimed; its parent's, if any")
    hyperparameters = models.JSONField(default=dict, blank=True)
    mutations = models.JSONField(default=dict, blank=True, help_text="{name: [old, new]}")
    env_steps = models.BigIntegerField(default=0, help_text="planned before the run, trained after it")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    failure = models.CharField(max_length=20, choices=Failure.choices, default=Failure.NONE, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    device = models.CharField(max_length=40, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="last time a task message was sent")
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run", "pod", "number"]
        constraints = [models.UniqueConstraint(fields=["pod", "number"], name="runs_generation_pod_number_unique")]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"]),
            # per-run counts and sums by status: the runs list's "pods running" and env steps,
            # the budgets page, dispatching
            models.Index(fields=["run", "status"], name="runs_generation_run_status"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} pod {self.pod_id} gen {self.number}"


class Agent(models.Model):
    """An agent of a run: its checkpoint, validation score and where it came from.

    ``kind`` ``trained``: a pod's generation trained it (``generation``, ``pod`` and ``depth``
    set; lineage through ``parent``). ``generation`` is unique, so a generation that ran twice
    (worker killed, redelivered message) still yields exactly one agent.

    ``kind`` ``ensemble``: the mean action of trained agents of the run (``members``, best
    first; ``webapp.runs.services.ensembles``). It has no generation, pod, parent, depth or lineage, never
    ranks on the leaderboard and is not a trial of the run's Deflated Sharpe Ratio.

    ``created_seq`` orders agents within a run and breaks score ties on the leaderboard (older
    first).
    """

    class Kind(models.TextChoices):
        TRAINED = "trained"
        ENSEMBLE = "ensemble"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="agents")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.TRAINED)
    generation = models.OneToOneField(
        Generation,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="agent",
        help_text="the generation that trained it; null for an ensemble",
    )
    pod = models.ForeignKey(
        Pod, on_delete=models.CASCADE, null=True, blank=True, related_name="agents", help_text="null for an ensemble"
    )
    members = models.JSONField(
        default=list,
        blank=True,
        help_text="an ensemble's member agent ids, best first (the leaderboard's order when it was built); "
        "[] for a trained agent",
    )
    parent = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children")
    score = models.FloatField(null=True, blank=True, help_text="validation score; null when it has none (NaN)")
    score_se = models.FloatField(
        null=True, blank=True, help_text="SE of the score, from its sub-windows; null if unknown"
    )
    metrics = models.JSONField(default=dict)
    provenance = models.JSONField(
        default=dict,
        blank=True,
        help_text="what produced it, recorded by the worker: code_version, packages (python, torch, numpy), "
        "data_sha256, seed (the generation's)",
    )
    algorithm = models.CharField(max_length=20, blank=True, help_text="the algorithm it was trained with")
    hyperparameters = models.JSONField(default=dict)
    tickers = models.JSONField(default=list, blank=True, help_text="the tickers it trades, from its checkpoint")
    checkpoint = models.CharField(max_length=300, help_text="name in the default storage")
    sha256 = models.CharField(max_length=64)
    created_seq = models.PositiveIntegerField()
    on_leaderboard = models.BooleanField(default=False)
    depth = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=1,
        help_text="generation in the lineage: 1 for a fresh agent, the parent's + 1 otherwise; null for an ensemble",
    )
    total_env_steps = models.BigIntegerField(
        default=0,
        help_text="env steps of its whole line (ancestors + own); an ensemble's: of its members' lines, "
        "each agent counted once",
    )
    lineage = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="the fresh agent its line starts at",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", models.F("score").desc(nulls_last=True), "created_seq"]
        constraints = [
            models.UniqueConstraint(fields=["run", "created_seq"], name="runs_agent_run_seq_unique"),
            models.CheckConstraint(
                condition=Q(kind="trained", generation__isnull=False, pod__isnull=False, depth__isnull=False)
                | Q(
                    kind="ensemble",
                    generation__isnull=True,
                    pod__isnull=True,
                    parent__isnull=True,
                    depth__isnull=True,
                    on_leaderboard=False,
                ),
                name="runs_agent_kind_shape",
            ),
        ]
        # The leaderboard (``selectors.runs.leaderboard_queryset``), best first; partial: few agents
        # rank. No NULLS LAST in the index itself: SQLite rejects it in CREATE INDEX.
        indexes = [
            models.Index(
                F("run"),
                F("score").desc(),
                F("created_seq"),
                condition=Q(on_leaderboard=True),
                name="runs_agent_leaderboard",
            )
        ]

    def __str__(self) -> str:
        return f"agent {self.id} (run {self.run_id}, score {self.score:.3f})"

    @property
    def is_ensemble(self) -> bool:
        return self.kind == self.Kind.ENSEMBLE


class TrainingPoint(models.Model):
    """One point of a generation's training curve (at most ``TELEMETRY_MAX_POINTS`` per
    generation, recorded by the trainer, see ``trainer.pod.GenerationResult.telemetry``).

    One row holds every curve at one moment (a compact wide row, not one row per metric or env
    step); a metric the algorithm does not have is NULL (SAC has no clip fraction, PPO no
    alpha). ``attempt`` is the generation's attempt that recorded it: points of an attempt
    that lost its claim are not read (``telemetry.points``).
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="training_points")
    generation = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="training_points")
    attempt = models.PositiveIntegerField()
    total_env_steps = models.BigIntegerField(help_text="env steps of the lineage so far (x axis)")
    env_steps = models.BigIntegerField(help_text="env steps of this generation so far")
    elapsed_s = models.FloatField(default=0.0)
    episode_return_mean = models.FloatField(null=True)
    policy_loss = models.FloatField(null=True)
    value_loss = models.FloatField(null=True)
    entropy = models.FloatField(null=True)
    approx_kl = models.FloatField(null=True)
    clip_fraction = models.FloatField(null=True)
    explained_variance = models.FloatField(null=True)
    learning_rate = models.FloatField(null=True)
    steps_per_s = models.FloatField(null=True)
    critic_loss = models.FloatField(null=True)
    actor_loss = models.FloatField(null=True)
    alpha_loss = models.FloatField(null=True)
    alpha = models.FloatField(null=True)

    class Meta:
        ordering = ["generation", "env_steps"]
        indexes = [models.Index(fields=["run", "generation", "env_steps"], name="runs_point_run_gen")]

    def __str__(self) -> str:
        return f"generation {self.generation_id} at {self.env_steps} env steps"


class Trial(models.Model):
    """One entry of the trial ledger: an agent a pod trained and evaluated on validation, with
    the figures the Deflated Sharpe Ratio counts (Bailey & López de Prado 2014: ``N`` trials and
    the variance of their figures).

    Written once per trained agent when its generation's result is stored
    (``services.trials.trial_record``), and kept when the agent is pruned or its run deleted
    (``agent`` and ``run`` become NULL), so a task's ledger counts every agent ever evaluated on
    it, across its runs. Ensembles are never trials (they average agents already counted).

    ``sharpe_ratio`` is the annualised validation Sharpe ratio; ``information_ratio`` the
    annualised information ratio of the agent's validation returns over the cost-free
    daily-rebalanced 1/N (``metrics["vs_equal_weight"]``), NULL where the evaluation had none
    (fewer than 20 returns, or an agent stored before the ledger).
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="trials")
    run = models.ForeignKey(Run, on_delete=models.SET_NULL, null=True, blank=True, related_name="trials")
    agent = models.OneToOneField("Agent", on_delete=models.SET_NULL, null=True, blank=True, related_name="trial")
    sharpe_ratio = models.FloatField(null=True, help_text="annualised validation Sharpe ratio")
    information_ratio = models.FloatField(null=True, help_text="annualised IR over cost-free 1/N")
    num_periods = models.PositiveIntegerField(null=True, help_text="validation returns behind the figures")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["task", "id"], name="runs_trial_task")]

    def __str__(self) -> str:
        return f"trial of agent {self.agent_id} on task {self.task_id}"
