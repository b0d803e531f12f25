"""Serving stored files (agent bundles, report data) in chunks, with HTTP ranges and an ETag."""

from __future__ import annotations

import re
from collections.abc import Iterator

from django.http import HttpResponse, HttpResponseBase, JsonResponse, StreamingHttpResponse

from webapp.core import artifacts

CHUNK_BYTES = 256 * 1024


_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")
UNSATISFIABLE = "unsatisfiable"


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """Parse a single-range ``Range`` header (RFC 9110 sec. 14.2).

    Returns:
        ``(first, last)`` inclusive byte positions; :data:`UNSATISFIABLE` when the range lies
        outside the file; ``None`` when the header is malformed or asks for several ranges (the
        whole file is then sent, as the RFC allows).
    """
    match = _RANGE.match(header or "")
    if not match or (not match.group(1) and not match.group(2)):
        return None
    first, last = match.group(1), match.group(2)
    if not first:  # suffix: the last N bytes
        n = int(last)
        if n == 0 or size == 0:
            return UNSATISFIABLE
        return max(0, size - n), size - 1
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        return UNSATISFIABLE
    end = int(last) if last else size - 1
    return start, min(end, size - 1)


def _chunks(name: str, start: int, length: int) -> Iterator[bytes]:
    # a ranged GET from a bucket, a seek in a local file (webapp.core.artifacts)
    yield from artifacts.read_range(name, start, length)


def serve_file(request, name: str, *, size: int, sha256: str, filename: str, content_type: str = "application/zip"):
    """Stream a stored file with ``Content-Length``, a strong ``ETag`` (its SHA-256) and
    single-range support, so an interrupted download resumes (``Range`` + ``If-Range``).

    Answers 304 to a matching ``If-None-Match``, 206 with ``Content-Range`` to a satisfiable
    range (when ``If-Range``, if sent, still matches the ETag), 416 with ``Content-Range:
    bytes */size`` to an unsatisfiable one, else 200 with the whole file.
    """
    etag = f'"{sha256}"'
    headers = request.headers
    if_none_match = headers.get("If-None-Match")
    if if_none_match and (
        if_none_match.strip() == "*" or etag in [t.strip().removeprefix("W/") for t in if_none_match.split(",")]
    ):
        response: HttpResponseBase = HttpResponse(status=304)
        response["ETag"] = etag
        return response
    start, end, status = 0, size - 1, 200
    range_header = headers.get("Range")
    if_range = headers.get("If-Range")
    if range_header and (if_range is None or if_range.strip() == etag):
        parsed = parse_range(range_header, size)
        if parsed == UNSATISFIABLE:  # the API's error format, so a client can show why
            body = {
                "error": f"Range {range_header[:60]!r} lies outside the file's {size:,} bytes",
                "fields": {"Range": "unsatisfiable"},
            }
            response = JsonResponse(body, status=416)
            response["Content-Range"] = f"bytes */{size}"
            response["ETag"] = etag
            response["Accept-Ranges"] = "bytes"
            return response
        if parsed is not None:
            start, end = parsed
            status = 206
    length = max(0, end - start + 1)
    if request.method == "HEAD":  # the GET's headers, no body (and no file read)
        response = HttpResponse(status=status, content_type=content_type)
    else:
        response = StreamingHttpResponse(_chunks(name, start, length), status=status, content_type=content_type)
    response["Content-Length"] = str(length)
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = etag
    response["Cache-Control"] = "private, no-transform"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    if status == 206:
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    return response
