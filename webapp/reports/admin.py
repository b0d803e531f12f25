from django.contrib import admin

from webapp.reports.models import Backtest


@admin.register(Backtest)
class BacktestAdmin(admin.ModelAdmin):
    list_display = ("id", "owner", "run", "agent", "start", "end", "source", "status", "created_at")
    list_filter = ("status", "source")
    search_fields = ("run__name", "owner__username")
    raw_id_fields = ("owner", "agent", "run", "dataset")
    readonly_fields = ("metrics", "config", "daily_csv", "created_at", "started_at", "finished_at")
