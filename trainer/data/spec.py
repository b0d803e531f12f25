"""Which market data a task uses: :class:`DataSpec`, validated and JSON-able."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from trainer.data.coverage import MISSING_POLICIES, _check_date
from trainer.data.files import check_tickers
from trainer.data.indicators import DEFAULT_INDICATORS, validate_indicators
from trainer.data.intraday import check_options
from trainer.errors import ConfigError, DataError

_LOADER_DEFAULTS = {"timezone": "auto", "bar_label": "auto", "session": "regular"}


@dataclass
class DataSpec:
    """Which market data a task uses; JSON-able through :meth:`to_dict`/:meth:`from_dict`.

    Attributes:
        paths: data files or folders (see :func:`trainer.data.load_panel`); relative paths
            resolve against the ``data_dir`` given to :func:`load_market_data`.
        tickers: tickers to keep, in this column order, each once (a ticker listed twice is
            refused); ``None`` keeps every ticker (sorted).
        start: first day of the range, ``YYYY-MM-DD`` inclusive; ``None`` = first day of the data.
        end: last day, ``YYYY-MM-DD`` inclusive; ``None`` = last day of the data.
        indicators: stockstats indicator names (default FinRL's eight).
        turbulence: compute FinRL's turbulence index (else it is all 0).
        missing_policy: ``"drop"`` drops late-listing tickers, ``"start_later"`` starts the
            range when every chosen ticker has data (see the module doc).
        timezone, bar_label, session: the loader's intraday options (see
            :func:`trainer.data.load_panel`: ``"auto"``, ``"auto"``, ``"regular"`` by default);
            left out of :meth:`to_dict` at their defaults, so daily specs are unchanged.
        membership: a point-in-time membership file (``ticker,from,to``,
            :mod:`trainer.data.membership`), resolved like ``paths``; ``None`` (default, left
            out of :meth:`to_dict`) trades every ticker on every day.

    Raises:
        ConfigError: on construction, a field of the wrong type or value, naming the field.
    """

    paths: list[str]
    tickers: list[str] | None = None
    start: str | None = None
    end: str | None = None
    indicators: tuple[str, ...] = DEFAULT_INDICATORS
    turbulence: bool = True
    missing_policy: str = "drop"
    timezone: str = "auto"
    bar_label: str = "auto"
    session: str = "regular"
    membership: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.paths, str | Path):
            self.paths = [str(self.paths)]
        if not isinstance(self.paths, Sequence) or not self.paths:
            raise ConfigError("paths must be a non-empty list of data files", field="paths")
        for i, p in enumerate(self.paths):
            if not isinstance(p, str | Path) or not str(p).strip():
                raise ConfigError(f"paths[{i}] must be a file path", field=f"paths[{i}]")
        self.paths = [str(p) for p in self.paths]
        if self.tickers is not None:
            if isinstance(self.tickers, str) or not isinstance(self.tickers, Sequence) or not self.tickers:
                raise ConfigError("tickers must be a non-empty list of ticker symbols or null", field="tickers")
            for i, t in enumerate(self.tickers):
                if not isinstance(t, str) or not t.strip():
                    raise ConfigError(f"tickers[{i}] must be a ticker symbol", field=f"tickers[{i}]")
            try:
                self.tickers = check_tickers(self.tickers, field="tickers", item="{field}[{i}]")
            except DataError as exc:
                raise ConfigError(exc.message, field=exc.details["field"]) from None
        self.start = _check_date(self.start, "start")
        self.end = _check_date(self.end, "end")
        if self.start and self.end and self.start > self.end:
            raise ConfigError(f"end {self.end} is before start {self.start}", field="end")
        self.indicators = validate_indicators(self.indicators)
        if not isinstance(self.turbulence, bool):
            raise ConfigError("turbulence must be true or false", field="turbulence")
        if self.missing_policy not in MISSING_POLICIES:
            raise ConfigError(
                f"missing_policy must be one of {', '.join(MISSING_POLICIES)}, not {self.missing_policy!r}",
                field="missing_policy",
            )
        if self.membership is not None:
            if not isinstance(self.membership, str | Path) or not str(self.membership).strip():
                raise ConfigError(
                    "membership must be the path of a ticker,from,to CSV file or null", field="membership"
                )
            self.membership = str(self.membership)
        options = check_options(timezone=self.timezone, bar_label=self.bar_label, session=self.session)
        self.timezone, self.bar_label, self.session = options["timezone"], options["bar_label"], options["session"]

    def loader_options(self) -> dict[str, str]:
        """``timezone``, ``bar_label`` and ``session`` for :func:`trainer.data.load_panel`."""
        return {"timezone": self.timezone, "bar_label": self.bar_label, "session": self.session}

    def to_dict(self) -> dict:
        """Plain JSON-able dict (lists, strings, bools, null)."""
        d = asdict(self)
        d["indicators"] = list(self.indicators)
        for key, default in _LOADER_DEFAULTS.items():
            if d[key] == default:
                del d[key]
        if d["membership"] is None:
            del d["membership"]
        return d

    @classmethod
    def from_dict(cls, data: dict, *, prefix: str = "") -> DataSpec:
        """Build and validate a spec from a dict such as :meth:`to_dict` returns.

        Args:
            data: the fields; ``paths`` is required, the rest have defaults.
            prefix: dotted path of this spec inside a bigger config (e.g. ``"data"``), put
                in front of the ``field`` of raised errors.

        Raises:
            ConfigError: not a dict, an unknown key, a missing ``paths`` or an invalid value;
                ``details["field"]`` is the dotted field path.
        """
        dot = f"{prefix}." if prefix else ""
        if not isinstance(data, dict):
            raise ConfigError(f"{prefix or 'data'} must be an object", field=prefix or "data")
        known = {
            "paths",
            "tickers",
            "start",
            "end",
            "indicators",
            "turbulence",
            "missing_policy",
            "membership",
            *_LOADER_DEFAULTS,
        }
        for key in data:
            if key not in known:
                raise ConfigError(
                    f"{dot}{key}: unknown field (expected one of {', '.join(sorted(known))})", field=f"{dot}{key}"
                )
        if "paths" not in data:
            raise ConfigError(f"{dot}paths is required", field=f"{dot}paths")
        try:
            return cls(**data)
        except ConfigError as exc:
            name = exc.details.get("field", "")
            raise ConfigError(
                f"{dot}{exc.message}" if prefix else exc.message, **{**exc.details, "field": f"{dot}{name}"}
            ) from None
