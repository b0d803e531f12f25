"""Data files: finding them, reading them raw, column aliases, ticker symbols, and cheap
header-only readers (:func:`price_basis`, :func:`ticker_days`, :func:`trading_dates`).

:mod:`trainer.data.loading` turns what these read into a validated panel.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from trainer.errors import DataError
from trainer.limits import DEFAULT_LIMITS, InputLimits, mib

_ALIASES = {
    "date": "date",
    "datetime": "date",
    "timestamp": "date",
    "datetime_utc": "date",
    "datetime_et": "date",
    "datetime_est": "date",
    "datetime_ny": "date",
    "timestamp_utc": "date",
    "timestamp_et": "date",
    "date_time": "date",
    "day": "date",
    "tic": "tic",
    "ticker": "tic",
    "symbol": "tic",
    "open": "open",
    "high": "high",
    "low": "low",
    "close": "close",
    "volume": "volume",
    "vol": "volume",
    "adj_close": "adj_close",
    "adjclose": "adj_close",
    "adjusted_close": "adj_close",
    "adj_open": "adj_open",
    "adjusted_open": "adj_open",
    "adj_high": "adj_high",
    "adjusted_high": "adj_high",
    "adj_low": "adj_low",
    "adjusted_low": "adj_low",
}
_FILE_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")
_CHUNK = 1 << 20  # bytes read at a time while checking a file's size

TICKER_PATTERN = re.compile(r"[A-Z0-9.\-^=]{1,20}")
"""Allowed ticker symbols (after upper-casing): 1 to 20 letters, digits, ``.``, ``-``, ``^``
or ``=`` (``BRK.B``, ``BF-B``, ``^GSPC``, ``EURUSD=X``). Spaces, control and bidirectional
Unicode characters and anything else are refused, naming the row."""


#: Characters of a value a message quotes before it says how long the rest is (:func:`shown`).
SHOWN_CHARS = 40


def shown(value: object) -> str:
    """``value`` quoted for a message, with control and invisible characters escaped (never
    echoed raw into a page): ``'AAPL'``, ``'A\\u202eB'``; past :data:`SHOWN_CHARS` characters
    only the start and the length: ``'99999...' (5,000,000 characters)``, so a message stays short
    however long a cell."""
    text = str(value)
    if len(text) > SHOWN_CHARS:
        return f"{shown(text[:SHOWN_CHARS])[:-1]}...{shown(text[:SHOWN_CHARS])[-1]} ({len(text):,} characters)"
    if text.isprintable() and not any(
        0x200B <= ord(c) <= 0x200F or 0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 or c == "\ufeff"
        for c in text
    ):
        return repr(text)
    return ascii(text)


LISTED = 5
"""Items a message lists before it says how many more there are (:func:`listed`)."""


def listed(items: Iterable[object], limit: int = LISTED) -> str:
    """The first ``limit`` of ``items`` and a count of the rest, so that a message stays short
    however large the input: ``"201, 401, 601, 801, 1001 and 299,994 more"``."""
    text = [str(x) for x in items]
    more = len(text) - limit
    return ", ".join(text[:limit]) + (f" and {more:,} more" if more > 0 else "")


def check_ticker(value: object, *, field: str = "tickers", **details: object) -> str:
    """One ticker symbol, stripped and upper-cased, or an error naming it.

    Raises:
        DataError: the symbol is empty, longer than 20 characters or holds a character
            outside :data:`TICKER_PATTERN` (the message escapes control characters).
    """
    text = str(value).strip().upper()
    if not TICKER_PATTERN.fullmatch(text):
        raise DataError(
            f"{field}: ticker {shown(value)} is not a ticker symbol (1 to 20 letters, digits, '.', '-', '^' or '=')",
            field=field,
            **details,
        )
    return text


def check_tickers(values: Sequence[object], *, field: str = "tickers", item: str = "{field}.{i}") -> list[str]:
    """A list of ticker symbols a user typed: each checked by :func:`check_ticker`, none twice.
    The one check of the command line's ``--tickers``, a task's ``data.tickers`` and the web's
    ticker fields: ``AAPL,AAPL,MSFT`` once trained on 2 tickers without a word.

    Args:
        values: the symbols as typed (``"aapl"`` and ``"AAPL"`` are the same ticker).
        field: the list's field name in messages.
        item: the field of the ``i``-th symbol (``"{field}.{i}"``, or ``"{field}[{i}]"``).

    Returns:
        The symbols, stripped and upper-cased, in the order given.

    Raises:
        DataError: a symbol that is not one (field ``item``), or one listed more than once
            (field ``field``: ``"tickers: AAPL is listed twice; list each ticker once"``).
    """
    out = [check_ticker(value, field=item.format(field=field, i=i)) for i, value in enumerate(values)]
    counts = Counter(out)
    again = [t for t, n in counts.items() if n > 1]
    if again:
        n = counts[again[0]]
        say = (
            f"{again[0]} is listed {'twice' if n == 2 else f'{n:,} times'}"
            if len(again) == 1
            else f"{listed(again)} are each listed more than once"
        )
        raise DataError(f"{field}: {say}; list each ticker once", field=field)
    return out


def _canonical(name: object) -> str:
    key = re.sub(r"[\s\-.]+", "_", str(name).strip().lower())
    return _ALIASES.get(key, key)


def _is_parquet(path: Path) -> bool:
    return path.name.lower().endswith((".parquet", ".pq"))


def ticker_from_filename(path: str | Path) -> str:
    """Return the ticker a per-ticker file name stands for.

    The name up to its first ``_`` or ``.``, upper-cased: ``aapl.csv.gz`` -> ``AAPL``,
    ``QQQ_daily_eodhd_1999-03-10_2024-04-19.csv`` -> ``QQQ``.
    """
    return re.split(r"[_.]", Path(path).name, maxsplit=1)[0].strip().upper()


def expand_paths(paths: str | Path | Iterable[str | Path]) -> list[Path]:
    """Turn a file, a folder, or a list of both into a sorted-per-folder list of data files.

    Raises:
        DataError: a path does not exist, or a folder holds no data file (``file`` names it).
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and f.name.lower().endswith(_FILE_SUFFIXES))
            if not found:
                raise DataError(f"folder {p} holds no .csv, .csv.gz, .parquet or .pq file", file=str(p))
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise DataError(f"data file {p.absolute()} does not exist", file=str(p))
    if not out:
        raise DataError("no data file given", field="paths")
    return out


def _check_text(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> None:
    """Refuse a CSV (or gzipped CSV) that is not UTF-8 text, or that expands past ``limits``,
    before pandas reads it.

    The file is streamed in 1 MiB chunks (decompressed on the fly for ``.gz``), counting bytes
    and lines, so a small ``.csv.gz`` holding gigabytes is refused after ``limits.file_bytes``
    (or ``limits.file_rows`` lines) have passed, holding one chunk in memory.

    Raises:
        DataError: ``"<name>: not a text CSV file ..."`` for NUL bytes, bytes that are not
            UTF-8 (the offset and byte named), or a ``.gz`` name on a file that is not gzip;
            ``"<name>: ... more than N rows"`` / ``"... more than N MiB"`` past a limit
            (``field`` is ``file_rows`` or ``file_bytes``).
    """
    import codecs
    import gzip

    head = b""
    size = lines = 0
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                if not head:
                    head = chunk[: 1 << 16]
                size += len(chunk)
                lines += chunk.count(b"\n")
                if size > limits.file_bytes:
                    raise DataError(
                        f"{path.name}: the file holds more than {mib(limits.file_bytes)} of text once decompressed "
                        f"(the limit; {mib(path.stat().st_size)} on disk)",
                        file=str(path),
                        field="file_bytes",
                    )
                if lines - 1 > limits.file_rows:
                    raise DataError(
                        f"{path.name}: the file holds more than {limits.file_rows:,} rows (the limit)",
                        file=str(path),
                        field="file_rows",
                    )
    except (OSError, EOFError) as exc:
        raise DataError(f"{path.name}: not a text CSV file (not readable as gzip: {exc})", file=str(path)) from exc
    nul = head.find(b"\x00")
    if nul >= 0:
        raise DataError(
            f"{path.name}: not a text CSV file (it holds binary data, a NUL byte at offset {nul})", file=str(path)
        )
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path.name}: not a text CSV file (byte 0x{head[exc.start]:02x} at offset {exc.start} is not UTF-8; "
            "save the file as UTF-8 CSV)",
            file=str(path),
        ) from None


def _check_parquet(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> None:
    """Refuse a Parquet file whose footer declares more rows or uncompressed bytes than
    ``limits`` allow, before any column is read.

    Raises:
        DataError: past ``limits.file_rows`` or ``limits.file_bytes`` (``field`` names the limit);
            a file whose footer cannot be read.
    """
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as exc:
        raise DataError(f"{path.name}: cannot be read ({exc})", file=str(path)) from exc
    if meta.num_rows > limits.file_rows:
        raise DataError(
            f"{path.name}: the file holds {meta.num_rows:,} rows, more than {limits.file_rows:,} (the limit)",
            file=str(path),
            field="file_rows",
        )
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if size > limits.file_bytes:
        raise DataError(
            f"{path.name}: the file holds {mib(size)} of column data once decompressed, more than "
            f"{mib(limits.file_bytes)} (the limit)",
            file=str(path),
            field="file_bytes",
        )


def check_file_size(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> None:
    """Refuse a data file that expands past ``limits`` (see :func:`_check_text` and
    :func:`_check_parquet`); CSV files are also checked to be UTF-8 text.

    Raises:
        DataError: naming the file and the limit (``field`` ``file_bytes`` or ``file_rows``).
    """
    (_check_parquet if _is_parquet(path) else _check_text)(path, limits)


def _read_raw(path: Path, limits: InputLimits = DEFAULT_LIMITS) -> pd.DataFrame:
    check_file_size(path, limits)
    try:
        if _is_parquet(path):
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, encoding="utf-8-sig")
    except pd.errors.EmptyDataError as exc:
        raise DataError(f"{path.name}: file is empty", file=str(path)) from exc
    except UnicodeDecodeError as exc:  # past the first 64 KiB checked above
        raise DataError(f"{path.name}: not a text CSV file ({exc.reason} at byte {exc.start})", file=str(path)) from exc
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{path.name}: cannot be read ({exc})", file=str(path)) from exc
    if frame.empty:
        raise DataError(f"{path.name}: file has a header but no data rows", file=str(path))
    return frame


def price_basis(paths: str | Path | Sequence[str | Path]) -> str:
    """Which close the loader uses for these files, read from their headers only.

    Returns:
        ``"adjusted close"`` when every file has an adjusted close (``adj_close`` or all four
        ``adj_*`` columns), ``"raw close"`` when none has, ``"mixed (adjusted and raw close)"``
        otherwise.

    Raises:
        DataError: a path does not exist or a file cannot be read.
    """
    kinds = set()
    for path in expand_paths(paths):
        try:
            if _is_parquet(path):
                import pyarrow.parquet as pq

                names = pq.read_schema(path).names
            else:
                names = list(pd.read_csv(path, nrows=0, encoding="utf-8-sig").columns)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            raise DataError(f"{path.name}: cannot be read ({exc})", file=str(path)) from exc
        kinds.add("adjusted close" if "adj_close" in {_canonical(c) for c in names} else "raw close")
    return kinds.pop() if len(kinds) == 1 else "mixed (adjusted and raw close)"


def ticker_days(
    paths: str | Path | Sequence[str | Path],
    *,
    tickers: Sequence[str] | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> pd.DataFrame:
    """The ``(date, tic)`` pairs of the files, reading only the date and ticker columns.

    Cheap (no price validation, no indicators): for checking a task's tickers and date splits
    against files that :func:`load_panel` has already accepted. Unparseable dates are skipped.

    Args:
        paths: as for :func:`load_panel`.
        tickers: only rows of these tickers (case-insensitive); ``None`` = every row.
        limits: a file expanding past these is refused (:func:`check_file_size`).

    Returns:
        Columns ``date`` (datetime64[ns]) and ``tic`` (str, upper case), unique pairs.

    Raises:
        DataError: a path does not exist, a file cannot be read or has no date column.
    """
    wanted = None if tickers is None else {str(t).strip().upper() for t in tickers}
    found: list[pd.DataFrame] = []
    for path in expand_paths(paths):
        check_file_size(path, limits)
        try:
            if _is_parquet(path):
                import pyarrow.parquet as pq

                names = pq.read_schema(path).names
                frame = pd.read_parquet(path, columns=[c for c in names if _canonical(c) in ("date", "tic")])
            else:
                frame = pd.read_csv(path, usecols=lambda c: _canonical(c) in ("date", "tic"), dtype=str)
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            raise DataError(f"{path.name}: cannot be read ({exc})", file=str(path)) from exc
        frame = frame.set_axis([_canonical(c) for c in frame.columns], axis=1)
        if "date" not in frame.columns:
            raise DataError(f"{path.name}: missing column(s) date", file=str(path), field="date")
        if "tic" in frame.columns:
            frame = frame.assign(tic=frame["tic"].astype(str).str.strip().str.upper())
        else:
            frame = frame.assign(tic=ticker_from_filename(path))
        if wanted is not None:
            frame = frame[frame["tic"].isin(wanted).to_numpy()]
        days = frame["date"]
        if not pd.api.types.is_datetime64_any_dtype(days):
            days = pd.to_datetime(days.astype(str).str.strip().str.slice(0, 10), format="%Y-%m-%d", errors="coerce")
        else:
            days = days.dt.tz_localize(None) if getattr(days.dt, "tz", None) is not None else days
            days = days.dt.normalize()
        found.append(pd.DataFrame({"date": days.to_numpy(), "tic": frame["tic"].to_numpy()}).dropna())
    if not found:
        return pd.DataFrame({"date": pd.Series([], dtype="datetime64[ns]"), "tic": pd.Series([], dtype=str)})
    return pd.concat(found, ignore_index=True).drop_duplicates().reset_index(drop=True)


def trading_dates(paths: str | Path | Sequence[str | Path], *, tickers: Sequence[str] | None = None) -> np.ndarray:
    """The days on which any of ``tickers`` has a row (see :func:`ticker_days`).

    Returns:
        (T,) sorted unique ``datetime64[D]``.

    Raises:
        DataError: a path does not exist, a file cannot be read or has no date column.
    """
    days = ticker_days(paths, tickers=tickers)["date"].to_numpy().astype("datetime64[D]")
    return np.unique(days)
