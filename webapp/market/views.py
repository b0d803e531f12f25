"""Pages of the market app: datasets (list + create with validation errors) and a dataset's
price preview."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods

from webapp.core.errors import AppError
from webapp.market import services
from webapp.market.forms import DatasetForm
from webapp.market.models import Dataset

PREVIEW_TICKERS = 8
PREVIEW_CACHE_S = 3600


def _read_prices(path: str) -> pd.DataFrame | None:
    """``date, tic, close`` rows of one already-validated file (adjusted close when present)."""
    lower = path.lower()
    wanted = {"date", "tic", "ticker", "symbol", "adj_close", "adjusted_close", "close"}
    if lower.endswith((".parquet", ".pq")):
        frame = pd.read_parquet(path)
    else:  # only the columns the chart needs: under half the parsing time of the Dow-30 file
        frame = pd.read_csv(path, usecols=lambda c: str(c).strip().lower() in wanted)
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    tic = next((c for c in ("tic", "ticker", "symbol") if c in frame.columns), None)
    close = next((c for c in ("adj_close", "adjusted_close", "close") if c in frame.columns), None)
    if "date" not in frame.columns or close is None:
        return None
    out = pd.DataFrame(
        {
            "date": pd.to_datetime(frame["date"].astype(str).str.slice(0, 10), format="%Y-%m-%d", errors="coerce"),
            "tic": frame[tic].astype(str) if tic else Path(path).name.split(".")[0].upper(),
            "close": pd.to_numeric(frame[close], errors="coerce"),
        }
    )
    return out.dropna()


def price_preview(dataset: Dataset, *, tickers: int = PREVIEW_TICKERS) -> dict[str, Any]:
    """Weekly closes of the dataset's first tickers, for a Plotly preview chart.

    The files were validated by the trainer's loader when the dataset was created; this only
    reads the columns a chart needs (cached for an hour per dataset).

    Returns:
        ``{"series": [{"ticker", "dates": [YYYY-MM-DD], "close": [USD]}], "tickers_total": n}``.
    """
    key = f"market:preview:{dataset.pk}:{dataset.created_at.timestamp()}:{tickers}"
    found = cache.get(key)
    if found is not None:
        return found
    frames = [f for f in (_read_prices(p) for p in dataset.source_paths()) if f is not None]
    series = []
    if frames:
        prices = pd.concat(frames)
        keep = [t for t in dataset.tickers if t in set(prices["tic"])][:tickers]
        prices = prices[prices["tic"].isin(keep)]
        for ticker in keep:
            weekly = prices[prices["tic"] == ticker].set_index("date")["close"].sort_index().resample("W-FRI").last()
            weekly = weekly.dropna()
            series.append(
                {
                    "ticker": ticker,
                    "dates": [d.strftime("%Y-%m-%d") for d in weekly.index],
                    "close": [round(float(v), 4) for v in weekly.to_numpy()],
                }
            )
    result = {"series": series, "tickers_total": len(dataset.tickers)}
    cache.set(key, result, PREVIEW_CACHE_S)
    return result


@login_required
@require_http_methods(["GET", "POST"])
def dataset_list(request: HttpRequest) -> HttpResponse:
    """The user's datasets and the form that creates one (errors by row and ticker)."""
    form = DatasetForm(request.POST or None, request.FILES or None)
    error: AppError | None = None
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            if d["file"]:
                dataset = services.dataset_create_from_upload(owner=request.user, name=d["name"], upload=d["file"])
            else:
                dataset = services.dataset_create_from_files(
                    owner=request.user, name=d["name"], paths=d["paths"], tickers=d["tickers"]
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
        status=400 if error else 200,
    )


@login_required
@require_GET
def dataset_detail(request: HttpRequest, dataset_id: int) -> HttpResponse:
    """A dataset: tickers, dates, loader notes and a chart of its prices."""
    dataset = Dataset.objects.filter(owner=request.user, pk=dataset_id).first()
    if dataset is None:
        raise Http404("dataset not found")
    return render(request, "market/detail.html", {"dataset": dataset, "preview": price_preview(dataset)})
