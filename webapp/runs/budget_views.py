"""The Budgets page: your budgets and their usage, your quota, a budget of your own (create,
raise, end); staff also assign budgets and set users' quotas."""

from __future__ import annotations

from django import forms as django_forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from webapp.core.errors import AppError
from webapp.core.forms import id_message, whole_number
from webapp.runs import budget_forms, forms, services
from webapp.runs.models import BudgetQuota
from webapp.runs.selectors import quotas
from webapp.runs.selectors.budgets import budget_queryset, budgets_with_usage, users_for_budgets


def _errors_into(form: django_forms.BaseForm, exc: AppError) -> None:
    for name, message in (exc.fields or {}).items():
        form.add_error(name if name in form.fields else None, message)
    if not exc.fields:
        form.add_error(None, exc.message)


def _own_budget(request: HttpRequest, budget_id) -> object:
    budget = budget_queryset(user=request.user).filter(pk=budget_id).first()
    if budget is None:
        raise Http404("budget not found")
    return budget


def _quota_rows() -> list[tuple[object, object]]:
    """Every active user with the quota staff set for them (``None`` where none)."""
    rows = {q.user_id: q for q in BudgetQuota.objects.all()}
    return [(user, rows.get(user.pk)) for user in users_for_budgets()]


@login_required
@require_http_methods(["GET", "POST"])
def budget_list(request: HttpRequest) -> HttpResponse:
    """Your budgets, their usage and your quota; POST ``action`` = ``own`` (create one of your
    own), ``raise``, ``end``, and for staff ``assign`` and ``quota``."""
    action = request.POST.get("action") if request.method == "POST" else None
    post = request.POST if action else None
    own_form = budget_forms.OwnBudgetForm(post if action == "own" else None)
    raise_form = budget_forms.RaiseBudgetForm(post if action == "raise" else None)
    assign_form = quota_form = None
    if request.user.is_staff:
        assign_form = forms.BudgetForm(post if action == "assign" else None)
        quota_form = budget_forms.QuotaForm(post if action == "quota" else None)
    elif action in ("assign", "quota"):
        raise Http404("not allowed")
    done = end_error = None
    try:
        if action == "own" and own_form.is_valid():
            budget = services.budget_create_own(actor=request.user, **own_form.cleaned_data)
            done = f"Budget {budget.name!r} created."
        elif action == "raise" and raise_form.is_valid():
            d = dict(raise_form.cleaned_data)
            budget = services.budget_change(actor=request.user, budget=_own_budget(request, d.pop("budget")), **d)
            done = f"Budget {budget.name!r} changed."
        elif action == "end":
            budget_id = whole_number(request.POST.get("budget"))
            if budget_id is None:  # a hidden input, so a hand-made post: said, not a 500 of the lookup
                end_error = f"budget: {id_message('a budget', request.POST.get('budget', ''))}"
            else:
                budget = services.budget_end(actor=request.user, budget=_own_budget(request, budget_id))
                done = f"Budget {budget.name!r} ended."
        elif action == "assign" and assign_form.is_valid():
            d = assign_form.cleaned_data
            services.budget_create(actor=request.user, **d)
            done = f"Budget {d['name']!r} assigned to {d['owner'].username}."
        elif action == "quota" and quota_form.is_valid():
            d = quota_form.cleaned_data
            services.quota_set(actor=request.user, **d)
            done = f"Quota of {d['user'].username} set."
    except AppError as exc:
        form = {"own": own_form, "raise": raise_form, "assign": assign_form, "quota": quota_form}.get(action)
        if form is None:
            messages.error(request, exc.message)
            return redirect("runs:budgets")
        _errors_into(form, exc)
    if done:
        messages.success(request, done)
        return redirect("runs:budgets")
    bound = [f for f in (own_form, raise_form, assign_form, quota_form) if f is not None and f.is_bound]
    status = 400 if end_error or any(f.errors for f in bound) else 200
    return render(
        request,
        "runs/budgets.html",
        {
            "budgets": budgets_with_usage(user=request.user),
            "quota": quotas.quota_of(request.user),
            "end_error": end_error,
            "own_form": own_form,
            "raise_form": raise_form,
            "form": assign_form,
            "quota_form": quota_form,
            "quotas": _quota_rows() if request.user.is_staff else (),
        },
        status=status,
    )
