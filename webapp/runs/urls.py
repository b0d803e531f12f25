"""Page URLs of the runs app (namespace ``runs``)."""

from django.urls import path

from webapp.runs import agent_views, budget_views, views

app_name = "runs"

urlpatterns = [
    path("runs/", views.run_list, name="list"),
    path("runs/new/", views.run_new, name="new"),
    path("runs/compare/", views.run_compare, name="compare"),
    path("runs/<int:run_id>/", views.run_detail, name="detail"),
    path("runs/<int:run_id>/agents/", views.run_agents, name="agents"),
    path("runs/<int:run_id>/reports/", views.run_reports, name="reports"),
    path("runs/<int:run_id>/<slug:action>/", views.run_control, name="control"),
    path("agents/<int:agent_id>/", agent_views.agent_detail, name="agent"),
    path("agents/<int:agent_id>/bundle/", agent_views.agent_bundle, name="agent-bundle"),
    path("budgets/", budget_views.budget_list, name="budgets"),
    path("workers/", views.worker_list, name="workers"),
    path("workers/log/<int:run_id>/", views.worker_log, name="worker-log"),
]
