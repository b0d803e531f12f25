"""Pages of the runs app: list, new/clone, live detail, controls, every agent of a run,
compare and workers (the Budgets page is :mod:`webapp.runs.budget_views`, the pages of one
agent are :mod:`webapp.runs.agent_views`).

Views stay thin: forms parse, ``services`` write, ``selectors`` read. Objects of
other users are 404s (every lookup is scoped to ``request.user``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from webapp import engine
from webapp.core.errors import AppError
from webapp.core.formatting import format_duration, format_hyperparameters
from webapp.core.forms import id_message, whole_number
from webapp.core.limits import refusal_response
from webapp.demo import profiles as demo_profiles
from webapp.runs import algorithms, bounds, form_initial, forms, services
from webapp.runs.form_help import HYPERPARAMETER_HELP
from webapp.runs.models import Agent
from webapp.runs.selectors import (
    baselines,
    compare,
    curves,
    deflated,
    estimate,
    lineage,
    run_table,
    seed_groups,
    workers,
)
from webapp.runs.selectors import runs as run_selectors
from webapp.runs.selectors.budgets import budget_progress
from webapp.runs.selectors.ensembles import ensemble_k, one_se_member_ids
from webapp.runs.selectors.payloads import pod_payload, run_payload, score_note, with_score_notes
from webapp.runs.selectors.runs import (
    dataset_queryset,
    leaderboard_queryset,
    run_get,
    run_pods,
    score_history,
)
from webapp.runs.services import archive, ensembles

PAGE_SIZE = 50
#: leaderboard rows the run page shows (the API pages through all of them)
LEADERBOARD_ROWS = 100


# --- runs ----------------------------------------------------------------------------------


def _run_or_404(request: HttpRequest, run_id: int):
    run = run_get(user=request.user, run_id=run_id)
    if run is None:
        raise Http404("run not found")
    return run


@login_required
@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    """Paginated runs with filters (status, algorithm, search)."""
    filters = forms.RunFilterForm(request.GET or None)
    values = filters.cleaned_data if filters.is_valid() else {}
    qs = run_selectors.run_list(
        user=request.user,
        status=values.get("status", ""),
        algorithm=values.get("algorithm", ""),
        search=values.get("q", ""),
        tag=values.get("tag", ""),
    )
    qs = qs.filter(archived=bool(values.get("archived")))
    qs, sort = run_table.sort_runs(run_table.with_columns(qs), request.GET.get("sort", ""))
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    runs = with_score_notes(list(page.object_list))
    rows = [(run, budget_progress(run.budget, run)) for run in runs]
    query = request.GET.copy()
    query.pop("page", None)
    unsorted = query.copy()
    unsorted.pop("sort", None)
    columns = [
        {
            "key": key,
            "label": label,
            "title": title,
            "sort": f"-{key}" if sort == key else key,
            "active": sort.removeprefix("-") == key,
        }
        for key, (label, title) in run_table.COLUMNS.items()
    ]
    return render(
        request,
        "runs/list.html",
        {
            "filters": filters,
            "page": page,
            "rows": rows,
            "query": query.urlencode(),
            "unsorted": unsorted.urlencode(),
            "columns": {c["key"]: c for c in columns},
            "sort": sort,
        },
    )


def _check_the_rest(form: forms.RunForm, user) -> None:
    """A form whose fields failed: the services still check the task's settings that parsed
    (tickers against the dataset, split order and overlap, env and hyperparameters) without
    saving anything, so every error comes back in one round."""
    partial = form.partial_task_kwargs()
    if partial is None:
        return
    kwargs, broken = partial
    try:
        services.task_prepare(owner=user, **kwargs)  # a check only: the task is never saved
    except AppError as exc:
        form.add_app_error(exc, skip_splits=broken)


@login_required
@require_http_methods(["GET", "POST"])
def run_new(request: HttpRequest) -> HttpResponse:
    """New run form; ``?clone=<id>`` prefills it from one of the user's runs."""
    if request.method == "POST":
        form = forms.RunForm(request.POST, user=request.user)
        if not form.is_valid():
            _check_the_rest(form, request.user)
        else:
            try:
                try:  # validated outside the transaction: it reads the data files (seconds)
                    task = services.task_prepare(owner=request.user, **form.task_kwargs())
                except AppError as exc:
                    # the run's own settings are checked too: every error in one answer
                    run_kwargs = {k: v for k, v in form.run_kwargs().items() if k not in ("budget", "name", "mutation")}
                    extra = services.run_settings_errors(**run_kwargs)
                    raise AppError(exc.message, fields={**exc.fields, **extra}) from exc
                runs = services.runs_create_with_task(  # the task and its runs, or neither
                    owner=request.user, task=task, seeds=form.cleaned_data.get("seeds") or 1, **form.run_kwargs()
                )
            except AppError as exc:
                form.add_app_error(exc)
            else:
                if form.cleaned_data["start_now"]:
                    for refused in services.runs_start(runs):
                        messages.error(request, f"Run created but not started: {refused}")
                if len(runs) > 1:
                    messages.success(
                        request, f"{len(runs)} runs of this configuration, seeds {runs[0].seed}-{runs[-1].seed}."
                    )
                return redirect("runs:detail", run_id=runs[0].pk)
    else:
        initial = {}
        clone_id = request.GET.get("clone", "")
        if clone_id:
            if whole_number(clone_id) is None:
                why = id_message("a run", clone_id)
                return refusal_response(AppError(f"clone: {why}", fields={"clone": why}), path=request.path)
            source = run_get(user=request.user, run_id=whole_number(clone_id))
            if source is None:
                raise Http404("run not found")
            initial = form_initial.initial_from_run(source)
        else:
            chosen = whole_number(request.GET.get("dataset"))  # a prefill: anything else starts blank
            dataset = dataset_queryset(user=request.user).filter(pk=chosen).first() if chosen is not None else None
            initial = form_initial.blank_initial(dataset, demo_splits=demo_profiles.SPLITS)
        form = forms.RunForm(initial=initial, user=request.user)
    defaults = {algo: algorithms.form_hyperparameters(algo) for algo in engine.algorithms()}
    mutations = {algo: algorithms.default_mutation(algo) for algo in engine.algorithms()}
    per_kind = {kind: engine.default_algorithm(kind) for kind, _ in form.fields["kind"].choices}
    steps = {algo: services.default_generation_steps(algo, defaults[algo]) for algo in engine.algorithms()}
    inputs = estimate.estimate_inputs(budgets=form.fields["budget"].queryset, algorithms=engine.algorithms())
    return render(
        request,
        "runs/new.html",
        {
            "form": form,
            "defaults": defaults,
            "mutation_defaults": mutations,
            "algorithm_defaults": {"kinds": per_kind, "generation_steps": steps},
            "help": HYPERPARAMETER_HELP,
            "estimate": inputs,
        },
        status=400 if request.method == "POST" else 200,  # a POST only gets here with errors
    )


@login_required
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """The live page: server-rendered first paint, then WebSocket deltas (``run_live.js``)."""
    run = _run_or_404(request, run_id)
    # The pieces of ``run_snapshot`` the first paint needs, without serializing a
    # leaderboard of thousands of agents that the page shows only the top of.
    run_data = run_payload(run)
    pods = [pod_payload(p) for p in run_pods(run)]
    board = list(leaderboard_queryset(run))
    run_sharpes = deflated.run_sharpes(run.pk)
    ledger = deflated.task_ledger(run.task_id)
    # the verdict reads the whole leaderboard, as the live events' does; the table its top rows
    board_baselines = [baselines.agent_baselines(a) for a in board]
    one_se = set(one_se_member_ids(run))  # the deliverable's members, as the live events mark them
    hp_keys = hyperparameter_columns(run)
    live = {
        "run_id": run.pk,
        "ws_path": f"/ws/runs/{run.pk}/",
        "api": reverse("api:run-detail", args=[run.pk]),
        "agent_url": reverse("runs:agent", args=[0]),
        "hp_keys": hp_keys,
        "leaderboard_size": run.leaderboard_size,
        "max_rows": LEADERBOARD_ROWS,
        "generation_steps": run.generation_steps,
    }
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "snapshot": {"run": run_data},
            "live": live,
            "leaderboard": [
                {
                    "agent": a,
                    "hp": format_hyperparameters(a.hyperparameters, hp_keys),
                    "baselines": b,
                    "within_one_se": a.id in one_se,
                    "deflated_sharpe": deflated.agent_dsr(a, run_sharpes),
                    "dsr_text": deflated.dsr_text(
                        deflated.agent_dsr_vs_equal_weight(a, ledger),
                        deflated.agent_dsr(a, run_sharpes),
                        note=b.get("note") or "",
                    ),
                }
                for a, b in zip(board[:LEADERBOARD_ROWS], board_baselines)
            ],
            "verdict": baselines.leaderboard_verdict(board_baselines),
            "max_rows": LEADERBOARD_ROWS,
            "ensemble_k": ensemble_k(run),
            "seed_group": seed_groups.group_summary(user=request.user, group=run.seed_group),
            "pods": pods,
            "history": score_history(run),
            "usage": run_data["budget"],
            "progress": run_data["budget"]["progress"],
            "wall_clock_limit": format_duration(run.budget.max_wall_clock_s),
            "scale_form": forms.ScaleForm(initial={"num_pods": run.num_pods}),
            "metrics_config": metrics_config(
                api=reverse("api:run-metrics", args=[run.pk]),
                algorithm=run.task.algorithm,
                group="lineage",
                title="against each line's cumulative env steps",
            ),
        },
    )


@login_required
def run_reports(request: HttpRequest, run_id: int) -> HttpResponse:
    """The run page's "Backtest reports" section alone (``static/js/run_reports.js`` refreshes
    it from here instead of re-reading the whole page)."""
    run = run_get(user=request.user, run_id=run_id)
    if run is None:
        raise Http404("run not found")
    return render(request, "runs/_reports.html", {"run": run})


def metrics_config(*, api: str, algorithm: str, group: str, title: str = "") -> dict[str, Any]:
    """What ``templates/runs/_metrics.html`` and ``run_metrics.js`` need: the curves' API, the
    algorithm's metrics (name -> label), the first one shown and how lines are grouped."""
    names = curves.ALGORITHM_METRICS.get(algorithm, tuple(curves.METRICS))
    return {
        "api": api,
        "metrics": {n: curves.METRICS[n] for n in names},
        "default_metric": "episode_return_mean",
        "group": group,
        "title": title,
    }


def hyperparameter_columns(run) -> list[str]:
    """Hyperparameters the leaderboard shows: those the tournament mutates, else the
    learning rate(s)."""
    bounds = list((run.mutation or {}).get("bounds") or {})
    if bounds:
        return bounds
    return [k for k in run.task.hyperparameters if "learning_rate" in k] or list(run.task.hyperparameters)[:2]


CONTROLS = {
    "start": lambda run, form: services.run_start(run=run),
    "pause": lambda run, form: services.run_pause(run=run),
    "resume": lambda run, form: services.run_resume(run=run),
    "stop": lambda run, form: services.run_stop(run=run, backtest=form.get("backtest") in ("1", "on", "true")),
}


@login_required
@require_POST
def run_control(request: HttpRequest, run_id: int, action: str) -> HttpResponse:
    """Form posts of the run page's controls (the page's script uses the API instead)."""
    run = _run_or_404(request, run_id)
    try:
        if action == "scale":
            form = forms.ScaleForm(request.POST)
            if not form.is_valid():
                why = f"enter a whole number of pods, {bounds.RUN['num_pods'].text()}"
                raise AppError(f"num_pods: {why}", fields={"num_pods": why})
            services.run_scale(run=run, num_pods=form.cleaned_data["num_pods"])
        elif action == "annotate":
            archive.run_annotate(run=run, tags=request.POST.get("tags", ""), note=request.POST.get("note", ""))
        elif action in ("archive", "unarchive"):
            archive.run_archive(run=run, archived=action == "archive")
        elif action == "ensemble":
            k = whole_number(request.POST.get("k", ensembles.DEFAULT_K))
            if k is None:
                got = request.POST.get("k", "")[:40]
                raise AppError(f"k: enter a whole number of agents, got {got!r}", fields={"k": "a whole number"})
            agent, created = ensembles.ensemble_get_or_create(run=run, k=k)
            members = ", ".join(f"#{i}" for i in agent.members)
            if created:
                messages.success(request, f"Ensemble of agents {members} built.")
            else:
                messages.info(request, f"The ensemble of agents {members} already existed: nothing was built.")
            return redirect("runs:agent", agent_id=agent.pk)
        elif action == "delete":
            files = archive.run_delete(run=run)
            messages.success(request, f"Run {run.name!r} deleted with its agents, backtests and {files} files.")
            return redirect("runs:list")
        elif action in CONTROLS:
            CONTROLS[action](run, request.POST)
        else:
            raise Http404("unknown action")
    except AppError as exc:
        messages.error(request, exc.message)
    return redirect("runs:detail", run_id=run.pk)


# --- every agent of a run ------------------------------------------------------------------

AGENT_PAGE_SIZE = 50
#: Columns of the all-agents table: (sort key, header, title).
AGENT_COLUMNS = [
    ("id", "Agent", "in the order they were submitted"),
    ("score", "Score", "validation score"),
    ("generation", "Generation", "depth in the lineage: a fresh agent is generation 1"),
    (None, "Parent", ""),
    (None, "Mutation", "hyperparameter changes applied when it was copied from its parent"),
    ("pod", "Pod", ""),
    ("env_steps", "Env steps own", "env steps its own generation trained"),
    ("total_env_steps", "Env steps line", "env steps of its whole line: ancestors' + own"),
]


@login_required
@require_GET
def run_agents(request: HttpRequest, run_id: int) -> HttpResponse:
    """Every agent of a run: sortable, filterable, paginated table (``?format=csv`` for all
    rows), the lineage tree and the score-vs-env-steps scatter."""
    run = _run_or_404(request, run_id)
    filters = forms.AgentFilterForm(request.GET or None)
    values = filters.cleaned_data if filters.is_valid() else {}
    sort = values.get("sort") or lineage.DEFAULT_SORT
    qs = lineage.agent_table(
        run,
        sort=sort,
        pod=values.get("pod"),
        lineage=values.get("lineage"),
        generation=values.get("generation"),
        min_score=values.get("min_score"),
        leaderboard_only=bool(values.get("leaderboard")),
    )
    if request.GET.get("format") == "csv" and not filters.errors:  # a bad filter: the page, 400
        response = HttpResponse(lineage.agents_csv(qs), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-agents.csv"'
        return response
    page = Paginator(qs, AGENT_PAGE_SIZE).get_page(request.GET.get("page"))
    # what the count is made of: the pods' trained agents and the ensembles built of them
    kinds = dict(qs.order_by().values_list("kind").annotate(n=Count("id")))
    query = request.GET.copy()
    query.pop("page", None)
    without_sort = query.copy()
    without_sort.pop("sort", None)
    columns = []
    for key, header, title in AGENT_COLUMNS:
        next_sort = None
        if key is not None:
            next_sort = f"-{key}" if sort != f"-{key}" else key
        arrow = " ↓" if key and sort == f"-{key}" else (" ↑" if key and sort == key else "")
        columns.append({"key": key, "header": header + arrow, "title": title, "next_sort": next_sort})
    return render(
        request,
        "runs/agents.html",
        {
            "run": run,
            "filters": filters,
            "page": page,
            "trained_count": kinds.get(Agent.Kind.TRAINED, 0),
            "ensembles_count": kinds.get(Agent.Kind.ENSEMBLE, 0),
            # every agent of a run is validated on the same days: one reason for all its scores
            "score_note": score_note(run),
            "rows": [
                {"agent": a, "mutation": lineage.mutation_text(a.generation.mutations) if a.generation else ""}
                for a in page.object_list
            ],
            "columns": columns,
            "query": query.urlencode(),
            "sort_query": without_sort.urlencode(),
            "tree": lineage.lineage_tree(run),
            "scatter": lineage.scatter_points(run),
            "agent_url": reverse("runs:agent", args=[0]),
        },
        status=400 if filters.errors else 200,  # the errors show above the table
    )


# --- workers (staff) -----------------------------------------------------------------------


def _staff_or_404(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise Http404("staff only")


@login_required
@require_GET
def worker_list(request: HttpRequest) -> HttpResponse:
    """Staff: each Celery worker (queues, device, what it trains, last heartbeat) and the
    latest failed generations with their one-line reason and a link to their log lines."""
    _staff_or_404(request)
    rows, error = workers.worker_rows()
    return render(
        request,
        "runs/workers.html",
        {"workers": rows, "error": error, "failed": workers.failed_generations()},
    )


@login_required
@require_GET
def worker_log(request: HttpRequest, run_id: int) -> HttpResponse:
    """Staff: the process-log lines of one run (``?pod=N`` for one pod)."""
    _staff_or_404(request)
    pod = request.GET.get("pod")
    pod_index = whole_number(pod) if pod else None
    if pod and pod_index is None:  # "²".isdigit() is true, yet int("²") raised: a 500
        why = f"expected a pod index (a whole number), got {pod[:40]!r}"
        return refusal_response(AppError(f"pod: {why}", fields={"pod": why}), path=request.path)
    lines = workers.log_lines(run_id=run_id, pod_index=pod_index)
    return render(request, "runs/worker_log.html", {"run_id": run_id, "pod": pod_index, "lines": lines})


@login_required
@require_GET
def run_compare(request: HttpRequest) -> HttpResponse:
    """Two to eight of the user's runs side by side: best score against env steps, the
    agents' hyperparameters and scores as parallel coordinates, the settings (differences only
    by default)."""
    ids = [int(i) for i in request.GET.getlist("ids") if i.isascii() and i.isdigit()]  # int("²") raises
    runs = [r for r in (run_get(user=request.user, run_id=i) for i in dict.fromkeys(ids)) if r is not None]
    with_score_notes(runs)  # one query; the curves and the list read the notes
    error = None
    if not 2 <= len(runs) <= compare.MAX_RUNS:
        error = f"Tick 2 to {compare.MAX_RUNS} of your runs to compare them (got {len(runs)})."
    context: dict[str, Any] = {"runs": runs, "error": error}
    if error is None:
        context.update(
            {
                "curves": compare.score_curves(runs),
                "parallel": compare.agent_dimensions(runs),
                "rows": compare.settings_rows(runs),
            }
        )
    return render(request, "runs/compare.html", context, status=400 if error else 200)
