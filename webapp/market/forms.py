"""Forms of the datasets page: upload a file, or pick files of the shared data folder."""

from __future__ import annotations

from django import forms

from webapp.market import services


class DatasetForm(forms.Form):
    """A new dataset from an uploaded file or from files in the data folder (one of the two)."""

    name = forms.CharField(max_length=200)
    file = forms.FileField(
        required=False,
        allow_empty_file=True,  # services.dataset_create_from_upload refuses it, by name
        help_text="CSV, CSV.gz or Parquet with date, tic, open, high, low, close, volume.",
    )
    paths = forms.MultipleChoiceField(
        required=False, help_text="Or files of the shared data folder.", widget=forms.SelectMultiple(attrs={"size": 6})
    )
    tickers = forms.CharField(required=False, help_text="Comma-separated tickers to keep (data-folder files only).")
    membership = forms.FileField(
        required=False,
        allow_empty_file=True,  # services refuse it, by name
        label="Index membership (optional)",
        help_text="CSV ticker,from,to (YYYY-MM-DD; to empty = still a member): each day then trades only that "
        "day's members, and 1/N is over them (a point-in-time universe, no survivorship bias).",
    )
    # intraday files only (several bars a day); daily files ignore them
    timezone = forms.ChoiceField(
        required=False,
        choices=[("auto", "detect"), ("UTC", "UTC"), ("America/New_York", "exchange time (America/New_York)")],
        initial="auto",
        label="Intraday time zone",
        help_text="Of stamps without an offset; detected from the column name (datetime_utc, datetime_et) or the times.",
    )
    bar_label = forms.ChoiceField(
        required=False,
        choices=[("auto", "detect"), ("start", "bar start"), ("end", "bar end")],
        initial="auto",
        label="Intraday stamps mark",
        help_text="Whether a stamp is the bar's start or end; the guess is shown on the dataset page.",
    )
    session = forms.ChoiceField(
        required=False,
        choices=[("regular", "regular session 09:30-16:00 ET"), ("extended", "extended hours 04:00-20:00 ET")],
        initial="regular",
        label="Intraday session",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["paths"].choices = [(p, p) for p in services.dataset_files()]

    def clean_tickers(self) -> list[str] | None:
        raw = self.cleaned_data.get("tickers") or ""
        tickers = [t.strip().upper() for t in raw.split(",") if t.strip()]
        return tickers or None

    def loader_options(self) -> dict[str, str]:
        """The intraday loader options chosen (``services`` checks them)."""
        return {k: self.cleaned_data.get(k) or "" for k in ("timezone", "bar_label", "session")}

    def clean(self):
        data = super().clean()
        if "file" in self.errors:
            return data  # a file was given and refused: its own error says why
        if not data.get("file") and not data.get("paths"):
            raise forms.ValidationError("Upload a file or pick files of the data folder.")
        if data.get("file") and data.get("paths"):
            raise forms.ValidationError("Give either a file or data-folder files, not both.")
        if data.get("file") and data.get("tickers"):  # not silently ignored
            self.add_error("tickers", "An uploaded file keeps every ticker in it; choose tickers on the run's task.")
        return data
