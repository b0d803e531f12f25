"""Pages of the market app: datasets (list + create with validation errors) and a dataset's
price preview."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods

from webapp.core.errors import AppError
from webapp.market import services
from webapp.market.forms import DatasetForm
from webapp.market.models import Dataset
from webapp.market.selectors import dataset_survivorship


def price_preview(dataset: Dataset) -> dict[str, Any]:
    """The dataset's weekly closes for the preview chart (``services.dataset_preview``: stored
    when the dataset is created, so the page never parses the price files)."""
    return services.dataset_preview(dataset)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_list(request: HttpRequest) -> HttpResponse:
    """The user's datasets and the form that creates one (errors by row and ticker)."""
    form = DatasetForm(request.POST or None, request.FILES or None)
    error: AppError | None = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            options = form.loader_options()
            extra = {"options": options, "membership": d.get("membership") or None}
            if d["file"]:
                dataset = services.dataset_create_from_upload(
                    owner=request.user, name=d["name"], upload=d["file"], **extra
                )
            else:
                dataset = services.dataset_create_from_files(
                    owner=request.user, name=d["name"], paths=d["paths"], tickers=d["tickers"], **extra
                )
        except AppError as exc:
            error = exc
            if "name" in exc.fields:
                form.add_error("name", exc.fields["name"])
        else:
            messages.success(request, f"Dataset {dataset.name!r} created: {len(dataset.tickers)} tickers.")
            target = request.POST.get("next", "")
            if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
                return redirect(target)
            return redirect("market:detail", dataset_id=dataset.pk)
    # The message is said once; field messages are listed only where they add to it.
    error_fields = {k: v for k, v in error.fields.items() if k != "name" and v not in error.message} if error else {}
    return render(
        request,
        "market/list.html",
        {
            "datasets": Dataset.objects.filter(owner=request.user),
            "form": form,
            "error": error,
            "error_details": error.details if error else {},
            "error_fields": error_fields,
            "next": request.GET.get("next") or request.POST.get("next", ""),
        },
        status=400 if error or (request.method == "POST" and form.errors) else 200,
    )


@login_required
@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """A dataset: tickers, dates, loader notes and a chart of its prices."""
    dataset = Dataset.objects.filter(owner=request.user, pk=dataset_id).first()
    if dataset is None:
        raise Http404("dataset not found")
    context = {"dataset": dataset, "preview": price_preview(dataset), "survivorship": dataset_survivorship(dataset)}
    return render(request, "market/detail.html", context)
