"""DRF serializers of the runs API: shapes only; services do the writes."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp import engine
from webapp.core.fields import (
    InputSerializer,
    RefuseUnknownKeys,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    strict_field_mapping,
)
from webapp.runs import bounds, services
from webapp.runs.models import ClusterBudget, Run, Task
from webapp.runs.selectors.budgets import budget_progress, budget_queryset
from webapp.runs.selectors.runs import dataset_queryset, task_queryset


@extend_schema_field(OpenApiTypes.INT)
class _UserScopedPK(serializers.PrimaryKeyRelatedField):
    """A primary key resolved among the request user's own objects only (another user's id
    reads as "does not exist", never as "forbidden")."""

    def __init__(self, scope, **kwargs):
        self._scope = scope
        super().__init__(**kwargs)

    def get_queryset(self):
        return self._scope(user=self.context["request"].user)

    def to_internal_value(self, data):
        """An id is a whole number (JSON integer, or digits in a form field): a float such as
        ``1.5`` or ``1e400`` (infinity once parsed) is the wrong type, not id 1 nor a 500; an
        integer beyond the database's 64-bit range names no object."""
        if isinstance(data, str) and data.strip().lstrip("-").isdigit():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("incorrect_type", data_type=type(data).__name__)
        if not -(2**63) <= data < 2**63:
            self.fail("does_not_exist", pk_value=data)
        return super().to_internal_value(data)


class BudgetSerializer(RefuseUnknownKeys, serializers.ModelSerializer):
    """A cluster budget with its caps and usage. ``owner`` is writable by staff only;
    ``purpose`` is ``own`` (counts against its owner's quota), ``assigned`` or ``demo``."""

    owner = serializers.SlugRelatedField(slug_field="username", queryset=get_user_model().objects.all(), required=False)
    gpu_hours_used = serializers.SerializerMethodField()
    progress = serializers.SerializerMethodField()
    serializer_field_mapping = strict_field_mapping(serializers.ModelSerializer.serializer_field_mapping)

    class Meta:
        model = ClusterBudget
        fields = [
            "id",
            "name",
            "owner",
            "max_concurrent_pods",
            "gpu_hours_cap",
            "max_wall_clock_s",
            "deadline",
            "env_step_cap",
            "gpu_seconds_used",
            "gpu_hours_used",
            "env_steps_used",
            "progress",
            "purpose",
            "ended_at",
            "created_at",
        ]
        read_only_fields = ["gpu_seconds_used", "env_steps_used", "purpose", "ended_at", "created_at"]

    def get_fields(self):
        """Each limit checked against its one bound (``bounds.BUDGET``), whose message states the
        whole range: the column's own maximum said "<= 9223372036854775807" for 1e30 pods where
        0 pods got "1 to 1,024"."""
        fields = super().get_fields()
        for name, bound in bounds.BUDGET.items():
            field = fields[name]
            field.max_value = field.min_value = None
            field.validators = [*bounds.drop_range_validators(field.validators), bound.validator()]
        return fields

    def get_gpu_hours_used(self, obj: ClusterBudget) -> float:
        return obj.gpu_seconds_used / 3600.0

    def get_progress(self, obj: ClusterBudget) -> float | None:
        """Largest fraction spent of any limit, the wall clock of the budget's active runs
        included (``budget_progress``; ``null`` when the budget has no limit)."""
        return budget_progress(obj)["fraction"]


class QuotaSerializer(serializers.Serializer):
    """A user's quota for budgets of their own (``webapp.runs.selectors.quotas.Quota``)."""

    device_hours = serializers.FloatField()
    max_concurrent_pods = serializers.IntegerField()
    hours_held = serializers.FloatField()
    pods_held = serializers.IntegerField()
    hours_left = serializers.FloatField()
    pods_left = serializers.IntegerField()
    raised = serializers.BooleanField(help_text="set by staff for this user (else the default of the settings)")


class TaskSerializer(serializers.ModelSerializer):
    """A task as stored (normalized by the trainer's config classes)."""

    class Meta:
        model = Task
        fields = [
            "id",
            "name",
            "dataset",
            "kind",
            "tickers",
            "data_notes",
            "splits",
            "env",
            "algorithm",
            "algorithms",
            "hyperparameters",
            "algorithm_hyperparameters",
            "selection",
            "created_at",
        ]
        read_only_fields = fields


class TaskCreateSerializer(InputSerializer):
    """Input of ``POST /api/tasks/``; the trainer validates the JSON parts (400 naming the
    dotted field, e.g. ``hyperparameters.learning_rate``)."""

    name = StrictCharField(max_length=200)
    dataset = _UserScopedPK(dataset_queryset)
    tickers = serializers.ListField(
        child=StrictCharField(max_length=20),
        required=False,
        default=None,
        allow_null=True,
        help_text="a non-empty subset of the dataset's tickers; leave it out (or null) for all of them",
    )
    splits = serializers.DictField(help_text='{"train": [start, end], "validation": [...], "test": [...]}')
    kind = serializers.ChoiceField(
        choices=["stock_trading", "portfolio"],
        default="stock_trading",
        help_text="stock_trading (whole-share trades) or portfolio (target weights over stocks and cash; "
        "a zero action holds equal weights)",
    )
    env = serializers.DictField(
        required=False, default=dict, help_text="settings of the kind's env; keys left out keep their defaults"
    )
    algorithm = serializers.ChoiceField(
        choices=engine.algorithms(),
        required=False,
        help_text="left out: the kind's default, direct for portfolio, ppo for stock_trading (docs/default-selection.md)",
    )
    hyperparameters = serializers.DictField(required=False, default=dict)
    algorithms = serializers.ListField(
        child=StrictCharField(max_length=20),
        required=False,
        default=None,
        allow_null=True,
        help_text="a mixed tournament: the algorithms fresh pods may train, round-robin by pod index; it must "
        "contain `algorithm`. Leave it out for `algorithm` alone",
    )
    algorithm_hyperparameters = serializers.DictField(
        required=False,
        default=None,
        allow_null=True,
        help_text='settings of the other allowed algorithms, e.g. {"sac": {"tau": 0.01}}; each takes the values '
        "given here, then `hyperparameters`' values of the names it shares with `algorithm`, then its defaults",
    )
    selection = serializers.DictField(
        required=False,
        default=dict,
        help_text='validation scoring: {"rule": "mean_minus_std" | "worst_window" | "full_sharpe", '
        '"windows": 4, "k": 1.0}; {} = mean - 1 x std of 4 sub-window Sharpe ratios',
    )


class RunSerializer(serializers.ModelSerializer):
    """A run as listed: status, best score, budget progress, pods running, owner."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    algorithm = serializers.CharField(source="task.algorithm", read_only=True)
    pods_running = serializers.IntegerField(read_only=True, default=None)
    agents_count = serializers.IntegerField(
        read_only=True, default=None, help_text="agents the run's pods trained (ensembles not counted)"
    )
    ensembles_count = serializers.IntegerField(
        read_only=True, default=None, help_text="ensembles built of the run's agents (GET /api/agents/?kind=ensemble)"
    )
    env_steps_done = serializers.IntegerField(read_only=True, default=None)
    budget_progress = serializers.SerializerMethodField()
    score_rule = serializers.DictField(
        read_only=True,
        help_text='what the scores are: the task\'s selection rule, {"rule", "windows", "k", "label"} '
        "(score_metric is its rule's name)",
    )
    score_metric = serializers.SerializerMethodField(
        help_text="the selection rule the scores follow (score_rule.rule: mean_minus_std, worst_window or "
        "full_sharpe), kept for older clients; score_rule also gives its windows, k and label"
    )
    tickers = serializers.ListField(
        source="task.tickers", child=serializers.CharField(), read_only=True, help_text="the tickers traded"
    )
    data_notes = serializers.ListField(
        source="task.data_notes",
        child=serializers.CharField(),
        read_only=True,
        help_text="what the data pipeline decided for the task's range",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "name",
            "owner",
            "task",
            "algorithm",
            "tickers",
            "data_notes",
            "backtest_error",
            "budget",
            "status",
            "status_reason",
            "num_pods",
            "generation_steps",
            "leaderboard_size",
            "fresh_probability",
            "mutation",
            "score_metric",
            "score_rule",
            "seed",
            "seed_group",
            "provenance",
            "device",
            "best_score",
            "tags",
            "note",
            "archived",
            "pods_running",
            "agents_count",
            "ensembles_count",
            "env_steps_done",
            "budget_progress",
            "event_seq",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_score_metric(self, obj: Run) -> str:
        """The name of the rule the run's scores follow (``Run.score_rule["rule"]``)."""
        return obj.score_rule["rule"]

    def get_budget_progress(self, obj: Run) -> float | None:
        """Largest fraction spent of any limit of the run's budget, its own wall clock included
        (``budget_progress``, as the run page shows it)."""
        return budget_progress(obj.budget, obj)["fraction"]


class RunCreateSerializer(InputSerializer):
    """Input of ``POST /api/runs/``: a task and budget of the user's, tournament settings."""

    task = _UserScopedPK(task_queryset)
    budget = _UserScopedPK(budget_queryset)
    name = StrictCharField(max_length=200, required=False, allow_blank=True, default="")
    num_pods = StrictIntegerField(default=2, help_text="size of the training pool")
    generation_steps = StrictIntegerField(
        required=False,
        help_text="env steps per generation, at least one PPO rollout (num_envs x rollout_steps); left out: "
        f"{services.DEFAULT_GENERATION_STEPS:,}, or {services.DIRECT_GENERATION_STEPS:,} in whole steps for direct",
    )
    leaderboard_size = StrictIntegerField(default=5, help_text="K agents kept")
    fresh_probability = StrictFloatField(default=0.1, help_text="chance of starting from scratch")
    mutation = serializers.DictField(
        required=False,
        allow_null=True,
        help_text='PBT mutation {"bounds": {name: [low, high]}, "factors": [0.8, 1.25], "probability": 1.0}; '
        "left out or null: the new-run form's default, the learning rates of the task's algorithms between 1e-5 and "
        "1e-2 moved by x0.8 or x1.25; {} = no mutation (children copy their parent's hyperparameters)",
    )
    seed = StrictIntegerField(default=0, min_value=0)
    seeds = StrictIntegerField(
        default=1,
        help_text="run this configuration with N seeds (seed, seed + 1, ...; 1 to 32): N runs in one seed group, "
        "answered as {seed_group, runs, summary}; 1 (the default) answers the run itself",
    )
    device = StrictCharField(max_length=20, default="auto")
    start = StrictBooleanField(default=False, help_text="start the run at once")


class IntervalSerializer(serializers.Serializer):
    """A mean with its 95 % Student-t interval over a seed group's runs (``None`` where undefined)."""

    n = serializers.IntegerField()
    mean = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    std = serializers.FloatField(allow_null=True)


class SeedGroupSerializer(serializers.Serializer):
    """A seed group: its runs' ids and seeds, and the mean and 95 % interval of their best
    validation score and best test Sharpe ratio (``webapp.runs.selectors.seed_groups``)."""

    group = serializers.CharField()
    runs = serializers.SerializerMethodField()
    seeds = serializers.ListField(child=serializers.IntegerField())
    score = IntervalSerializer()
    test_sharpe = IntervalSerializer()

    def get_runs(self, obj) -> list[int]:
        return [run.id for run in obj["runs"]]


class AnnotateSerializer(InputSerializer):
    tags = serializers.ListField(child=StrictCharField(), required=False, help_text="lower-cased, at most 20")
    note = StrictCharField(required=False, allow_blank=True)


class ArchiveSerializer(InputSerializer):
    archived = StrictBooleanField(default=True)


class ScaleSerializer(InputSerializer):
    num_pods = StrictIntegerField(help_text="new size of the training pool")


class StopSerializer(InputSerializer):
    backtest = StrictBooleanField(
        default=False,
        help_text="also backtest the best agents on the test split (default no); the run ends cancelled either way",
    )
