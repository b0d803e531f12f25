"""Pages of the reports app under ``reports/`` (namespace ``reports``).

The root URLconf includes this module at the site root when it exists; the API viewset is
added to the project's ``/api/`` router by :func:`webapp.reports.api.register`.
"""

from django.urls import path

from webapp.reports import views

app_name = "reports"

urlpatterns = [
    path("reports/", views.backtest_list, name="backtest-list"),
    path("reports/new/", views.backtest_new, name="backtest-new"),
    path("reports/compare/", views.backtest_compare, name="backtest-compare"),
    path("reports/<int:backtest_id>/", views.backtest_detail, name="backtest-detail"),
    path("reports/<int:backtest_id>/export.html", views.backtest_export_html, name="backtest-export-html"),
    path("reports/<int:backtest_id>/daily.csv", views.backtest_daily_csv, name="backtest-daily-csv"),
    path("reports/<int:backtest_id>/metrics.csv", views.backtest_metrics_csv, name="backtest-metrics-csv"),
]
