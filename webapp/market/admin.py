"""Admin of datasets (read-mostly: what was validated stays as it was found)."""

from django.contrib import admin

from webapp.market.models import Dataset


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "start_date", "end_date", "created_at")
    list_filter = ("owner",)
    search_fields = ("name",)
    readonly_fields = ("tickers", "start_date", "end_date", "notes", "created_at")
