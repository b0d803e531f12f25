"""DRF serializers of a run's agents: the leaderboard row with its baselines and deflated
Sharpe ratios, and the input and output of ``POST /api/runs/{id}/ensemble/``."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from webapp.core.fields import InputSerializer, StrictIntegerField
from webapp.runs.models import Agent
from webapp.runs.selectors import baselines, deflated


class EnsembleSerializer(InputSerializer):
    """Input of ``POST /api/runs/{id}/ensemble/``."""

    k = StrictIntegerField(
        default=3,
        min_value=2,
        max_value=16,
        help_text="leaderboard agents to average, the best first; at most the number of agents on the leaderboard",
    )


class AgentSerializer(serializers.ModelSerializer):
    """One agent: score, metrics, hyperparameters and where it came from.

    ``kind`` ``trained``: a pod's generation trained it. ``kind`` ``ensemble``: the mean action
    of ``members`` (agent ids, best first); its ``pod``, ``generation``, ``pod_generation``,
    ``env_steps``, ``lineage``, ``parent`` and ``mutations`` are null, ``algorithm`` and
    ``tickers`` are its members' (``"ppo+sac"`` for members of two algorithms).
    """

    kind = serializers.CharField(read_only=True, help_text="trained (by a pod) or ensemble")
    members = serializers.ListField(
        child=serializers.IntegerField(),
        read_only=True,
        help_text="an ensemble's member agent ids, best first; [] for a trained agent",
    )
    pod = serializers.IntegerField(
        source="pod.index", read_only=True, allow_null=True, help_text="null for an ensemble"
    )
    generation = serializers.IntegerField(
        source="depth",
        read_only=True,
        allow_null=True,
        help_text="depth in the lineage: 1 for a fresh agent, the parent's + 1; null for an ensemble",
    )
    pod_generation = serializers.IntegerField(
        source="generation.number",
        read_only=True,
        allow_null=True,
        help_text="the pod's generation counter that trained it; null for an ensemble",
    )
    env_steps = serializers.IntegerField(
        source="generation.env_steps",
        read_only=True,
        allow_null=True,
        help_text="env steps its own generation trained; null for an ensemble",
    )
    total_env_steps = serializers.IntegerField(
        read_only=True,
        help_text="env steps of its line: ancestors' + own (an ensemble's: its members' lines, each agent once)",
    )
    lineage = serializers.IntegerField(
        source="lineage_id", read_only=True, help_text="the fresh agent its line starts at; null for an ensemble"
    )
    mutations = serializers.JSONField(source="generation.mutations", read_only=True, allow_null=True)
    bundle_url = serializers.SerializerMethodField()
    deflated_sharpe = serializers.SerializerMethodField(
        help_text="Deflated Sharpe Ratio (Bailey & López de Prado 2014) of the validation Sharpe ratio, "
        "against the agents the run's pods trained and evaluated (ensembles are not trials; an ensemble's "
        "own DSR uses the same trials); null without a Sharpe ratio"
    )
    deflated_sharpe_vs_equal_weight = serializers.SerializerMethodField(
        help_text="Deflated Sharpe Ratio against 1/N: of the information ratio over the cost-free daily-rebalanced "
        "1/N on the validation days, against every agent ever evaluated on the task (the trial ledger, "
        "ledger_trials entries) and the variance of their information ratios; null without one"
    )
    ledger_trials = serializers.SerializerMethodField(help_text="entries in the task's trial ledger")
    vs_equal_weight = serializers.JSONField(
        source="metrics.vs_equal_weight",
        read_only=True,
        allow_null=True,
        help_text="against the cost-free daily-rebalanced 1/N on the validation days: sharpe_difference, ci95 "
        "(studentised block bootstrap, Ledoit & Wolf 2008), p_value (one-sided), active_return_annual, "
        "tracking_error, information_ratio, verdict (beats, trails, indistinguishable)",
    )
    vs_equal_weight_with_costs = serializers.JSONField(
        source="metrics.vs_equal_weight_with_costs",
        read_only=True,
        allow_null=True,
        help_text="the same against 1/N traded with the task's costs and no-trade band",
    )

    baselines = serializers.SerializerMethodField(
        help_text="the validation result against the untrained policy, 1/N and QQQ on the same days: "
        "score, Sharpe ratio and total return of each, the agent's excess return and Sharpe difference "
        "over each (vs_untrained, vs_equal_weight, vs_qqq; fractions), noise and the leaderboard's texts"
    )

    class Meta:
        model = Agent
        fields = [
            "id",
            "run",
            "kind",
            "members",
            "pod",
            "generation",
            "pod_generation",
            "env_steps",
            "total_env_steps",
            "lineage",
            "parent",
            "score",
            "score_se",
            "metrics",
            "algorithm",
            "hyperparameters",
            "mutations",
            "tickers",
            "sha256",
            "created_seq",
            "on_leaderboard",
            "created_at",
            "bundle_url",
            "deflated_sharpe",
            "deflated_sharpe_vs_equal_weight",
            "ledger_trials",
            "vs_equal_weight",
            "vs_equal_weight_with_costs",
            "baselines",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_baselines(self, obj: Agent) -> dict:
        """``webapp.runs.selectors.baselines.agent_baselines``: the same comparison the pages show."""
        return baselines.agent_baselines(obj)

    @extend_schema_field(OpenApiTypes.FLOAT)
    def get_deflated_sharpe(self, obj: Agent) -> float | None:
        """Deflated Sharpe Ratio against the agents the run's pods trained and evaluated (one
        query per run)."""
        cache = self.context.setdefault("run_sharpes", {})
        if obj.run_id not in cache:
            cache[obj.run_id] = deflated.run_sharpes(obj.run_id)
        return deflated.agent_dsr(obj, cache[obj.run_id])

    def _ledger(self, obj: Agent) -> deflated.LedgerStats:
        cache = self.context.setdefault("task_ledgers", {})
        task_id = obj.run.task_id
        if task_id not in cache:
            cache[task_id] = deflated.task_ledger(task_id)
        return cache[task_id]

    @extend_schema_field(OpenApiTypes.FLOAT)
    def get_deflated_sharpe_vs_equal_weight(self, obj: Agent) -> float | None:
        """DSR of the information ratio over 1/N against the task's trial ledger (one query per task)."""
        return deflated.agent_dsr_vs_equal_weight(obj, self._ledger(obj))

    @extend_schema_field(OpenApiTypes.INT)
    def get_ledger_trials(self, obj: Agent) -> int:
        return self._ledger(obj).trials

    def get_bundle_url(self, obj: Agent) -> str:
        from django.urls import reverse

        return reverse("api:agent-bundle", args=[obj.pk])


class EnsembleResultSerializer(AgentSerializer):
    """Output of ``POST /api/runs/{id}/ensemble/``: the ensemble agent, ``created`` (built now,
    HTTP 201; ``false``: an ensemble of these members existed and was returned, HTTP 200, nothing
    built) and ``detail``, one line saying which (context: ``created``)."""

    created = serializers.SerializerMethodField(help_text="false: an ensemble of these members existed")
    detail = serializers.SerializerMethodField(help_text="what happened, in one line")

    class Meta(AgentSerializer.Meta):
        fields = [*AgentSerializer.Meta.fields, "created", "detail"]
        read_only_fields = fields

    def get_created(self, obj: Agent) -> bool:
        return bool(self.context["created"])

    def get_detail(self, obj: Agent) -> str:
        members = ", ".join(f"#{i}" for i in obj.members)
        if self.context["created"]:
            return f"built agent #{obj.id}: the ensemble of agents {members}"
        return f"the ensemble of agents {members} already existed: agent #{obj.id} (nothing was built)"
