"""Admin of budgets, quotas, tasks, runs, pods, generations and agents (staff assign budgets here)."""

from django.contrib import admin

from webapp.runs.models import Agent, BudgetQuota, ClusterBudget, Generation, Pod, Run, Task


@admin.register(ClusterBudget)
class ClusterBudgetAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "owner",
        "purpose",
        "max_concurrent_pods",
        "gpu_hours_cap",
        "env_step_cap",
        "gpu_seconds_used",
        "ended_at",
    )
    list_filter = ("owner", "purpose")
    readonly_fields = ("gpu_seconds_used", "env_steps_used")


@admin.register(BudgetQuota)
class BudgetQuotaAdmin(admin.ModelAdmin):
    """Staff raise a user's quota for budgets of their own here or on the Budgets page."""

    list_display = ("user", "device_hours", "max_concurrent_pods", "updated_at")


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "dataset", "algorithm", "created_at")
    list_filter = ("algorithm",)


class PodInline(admin.TabularInline):
    model = Pod
    extra = 0
    fields = ("index", "state", "generations_done", "current_agent", "env_steps", "steps_per_s")
    readonly_fields = fields


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "status", "num_pods", "best_score", "started_at", "finished_at")
    list_filter = ("status",)
    readonly_fields = ("event_seq", "best_score", "started_at", "finished_at")
    inlines = [PodInline]


@admin.register(Generation)
class GenerationAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "pod", "number", "status", "attempt", "worker", "started_at", "finished_at")
    list_filter = ("status",)
    raw_id_fields = ("run", "pod", "parent")


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "pod", "score", "on_leaderboard", "created_seq", "created_at")
    list_filter = ("on_leaderboard",)
    raw_id_fields = ("run", "generation", "pod", "parent")
