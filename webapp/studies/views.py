"""Pages of the studies app: the list, the New study form and a study's page (per-fold table,
the stitched equity curve against 1/N and QQQ, the verdict and PBO)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from webapp.core.errors import AppError
from webapp.studies import selectors, services
from webapp.studies.forms import StudyForm


@login_required
def study_list(request: HttpRequest) -> HttpResponse:
    return render(request, "studies/list.html", {"studies": selectors.study_list(user=request.user)})


@login_required
def study_new(request: HttpRequest) -> HttpResponse:
    form = StudyForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        values = dict(form.cleaned_data)
        values["start"], values["end"] = str(values["start"]), str(values["end"])
        try:
            study = services.study_create(owner=request.user, **values)
        except AppError as exc:
            for field, message in (exc.fields or {"__all__": exc.message}).items():
                form.add_error(field if field in form.fields else None, message)
        else:
            return redirect("studies:study-detail", study_id=study.id)
    return render(request, "studies/new.html", {"form": form}, status=400 if form.errors else 200)


@login_required
def study_detail(request: HttpRequest, study_id: int) -> HttpResponse:
    try:
        study = selectors.study_get(user=request.user, study_id=study_id)
    except AppError as exc:
        raise Http404(exc.message) from exc
    figure = selectors.study_equity_figure(study)
    context = {
        "study": study,
        "folds": selectors.study_folds(study),
        "result": study.result or {},
        "figure": figure,
    }
    return render(request, "studies/detail.html", context)


@login_required
@require_POST
def study_cancel(request: HttpRequest, study_id: int) -> HttpResponse:
    try:
        services.study_cancel(study=selectors.study_get(user=request.user, study_id=study_id))
    except AppError as exc:
        if exc.status == 404:
            raise Http404(exc.message) from exc
    return redirect("studies:study-detail", study_id=study_id)
