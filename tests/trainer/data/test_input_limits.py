"""Decompression bombs: a small .csv.gz or bundle .zip that expands past the caps is refused while
it is streamed, with bounded memory, naming the file and the limit; files inside the caps load."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from trainer.artifacts.bundle_reader import BUNDLE_MEMBERS, read_bundle
from trainer.data.files import ticker_days
from trainer.data.loading import load_panel
from trainer.errors import BundleError, DataError
from trainer.limits import DEFAULT_LIMITS, MIB, InputLimits

REPO = Path(__file__).resolve().parents[3]

# A child process measures its own peak resident memory around one call, so the growth of
# the call is not hidden by (or blamed on) what the test process already holds.
_PEAK = """
import json, resource, sys, time
from pathlib import Path
import trainer.artifacts.bundle_reader, trainer.data.loading
from trainer.errors import TrainerError
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
try:
    if sys.argv[1] == "bundle":
        trainer.artifacts.bundle_reader.read_bundle(Path(sys.argv[2]))
    else:
        trainer.data.loading.load_panel(sys.argv[2])
    message = None
except TrainerError as exc:
    message = exc.message
    field = exc.details.get("field")
seconds = time.perf_counter() - t0
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(json.dumps({"message": message, "field": message and field, "seconds": seconds, "grown_mb": grown}))
"""


def _measure(kind: str, path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, kind, str(path)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rows_of(dow30_path: Path, n: int) -> tuple[str, str]:
    """The header and the first ``n`` data rows of the real Dow-30 file, as CSV text."""
    head = pd.read_csv(dow30_path, nrows=n)
    text = head.to_csv(index=False)
    header, _, body = text.partition("\n")
    return header + "\n", body


@pytest.fixture(scope="module")
def csv_bomb(dow30_path, tmp_path_factory) -> Path:
    """Under 2 MB of gzip holding 3,000,000 rows (about 240 MB of CSV text)."""
    header, body = _rows_of(dow30_path, 200)  # 16 kB: repeats inside deflate's 32 kB window
    block = body.encode() * 500  # 100,000 rows
    path = tmp_path_factory.mktemp("bomb") / "bomb.csv.gz"
    with gzip.open(path, "wb", compresslevel=6) as f:
        f.write(header.encode())
        for _ in range(30):
            f.write(block)
    assert path.stat().st_size < 2 * MIB
    return path


def test_a_csv_gz_bomb_is_refused_while_streaming_with_bounded_memory(csv_bomb):
    seen = _measure("csv", csv_bomb)
    assert seen["message"] is not None and "bomb.csv.gz" in seen["message"]
    assert f"more than {DEFAULT_LIMITS.file_rows:,} rows" in seen["message"] and seen["field"] == "file_rows"
    # the old loader parsed the whole file first: +950 MB and 13-24 s
    assert seen["grown_mb"] < 100, seen
    assert len(seen["message"]) < 300


def test_a_file_past_the_byte_cap_is_refused_naming_the_limit(dow30_path, tmp_path):
    header, body = _rows_of(dow30_path, 2000)
    path = tmp_path / "wide.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(header + body)
    small = InputLimits(file_bytes=64 * 1024)
    with pytest.raises(DataError, match=r"wide\.csv\.gz: the file holds more than 65,536 bytes of text") as exc:
        load_panel(path, limits=small)
    assert exc.value.details["field"] == "file_bytes"
    with pytest.raises(DataError, match="more than 500 rows"):
        ticker_days([path], limits=InputLimits(file_rows=500))
    assert len(load_panel(path, limits=InputLimits(file_rows=2000))) == 2000


def test_a_parquet_file_past_the_row_cap_is_refused_from_its_footer(dow30_path, tmp_path):
    path = tmp_path / "dow.parquet"
    pd.read_csv(dow30_path, nrows=3000).to_parquet(path)
    with pytest.raises(DataError, match=r"dow\.parquet: the file holds 3,000 rows, more than 1,000") as exc:
        load_panel(path, limits=InputLimits(file_rows=1000))
    assert exc.value.details["field"] == "file_rows"


def test_the_real_data_files_load_under_the_default_limits(nasdaq100_path):
    panel = load_panel(nasdaq100_path)
    assert len(panel) == 251_966


@pytest.fixture(scope="module")
def bundle_bomb(tmp_path_factory) -> Path:
    """A bundle zip of well under 1 MB whose policy.onnx holds 512 MiB of zeros."""
    path = tmp_path_factory.mktemp("bundle") / "bomb.zip"
    zeros = bytes(MIB)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name in BUNDLE_MEMBERS:
            with zf.open(name, "w", force_zip64=True) as f:
                for _ in range(512 if name == "policy.onnx" else 0):
                    f.write(zeros)
                f.write(b"{}" if name == "config.json" else b"")
    assert path.stat().st_size < 2 * MIB
    return path


def test_a_bundle_bomb_is_refused_before_its_members_are_read(bundle_bomb):
    seen = _measure("bundle", bundle_bomb)
    assert seen["message"] is not None and "policy.onnx" in seen["message"] and "(the limit)" in seen["message"]
    assert seen["field"] == "bundle_bytes"
    assert seen["grown_mb"] < 50, seen  # the old reader held the 512 MiB member twice: +1 GB, 9 s


def test_a_bundle_under_a_smaller_cap_is_refused_naming_the_member(bundle_bomb, tmp_path):
    path = tmp_path / "small.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name in BUNDLE_MEMBERS:
            zf.writestr(name, b"x" * (4096 if name == "README.md" else 10))
    with pytest.raises(BundleError, match=r"README\.md: 4,096 bytes\), more than 1,024 bytes \(the limit\)"):
        read_bundle(path, InputLimits(bundle_bytes=1024))
    with pytest.raises(BundleError, match="SHA256SUMS does not list"):  # inside the cap: read, then checked
        read_bundle(path, InputLimits(bundle_bytes=8192))
