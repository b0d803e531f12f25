"""Where artifacts live: Django's ``STORAGES`` from ``PADDOCK_STORAGE`` (a local folder, the
default, or an S3-compatible bucket through django-storages and boto3).

Artifacts are checkpoints, agent bundles and their sidecars and backtests' daily series
(``STORAGES["default"]``), and users' uploaded data files (``STORAGES["uploads"]``). With ``PADDOCK_STORAGE=s3`` every process (web, every worker) reads and
writes them in one bucket, so no folder has to be shared between machines. Credentials come
from boto3's own chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a web identity token,
an instance profile), never from Paddock's settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webapp.config.env import SettingsError, env_str, env_url

KINDS = ("local", "s3")
ADDRESSING_STYLES = ("auto", "path", "virtual")


def _s3_options(folder: str = "") -> dict[str, Any]:
    """The S3 backend's options (``storages.backends.s3.S3Storage``) from the environment.

    ``file_overwrite`` is off, as on a local folder: saving under a taken name picks a new one,
    which the bundle export's race relies on (the loser deletes only its own copy).
    """
    bucket = env_str("PADDOCK_S3_BUCKET", "")
    if not bucket:
        raise SettingsError("PADDOCK_S3_BUCKET: required with PADDOCK_STORAGE=s3 (the bucket's name)")
    endpoint = env_str("PADDOCK_S3_ENDPOINT_URL", "")
    if endpoint:
        endpoint = env_url("PADDOCK_S3_ENDPOINT_URL", endpoint, schemes=("http", "https"))
    style = env_str("PADDOCK_S3_ADDRESSING_STYLE", "auto") or "auto"
    if style not in ADDRESSING_STYLES:
        raise SettingsError(f"PADDOCK_S3_ADDRESSING_STYLE: expected auto, path or virtual, got {style!r}")
    prefix = (env_str("PADDOCK_S3_PREFIX", "") or "").strip("/")
    options: dict[str, Any] = {
        "bucket_name": bucket,
        "location": "/".join(p for p in (prefix, folder) if p),
        "file_overwrite": False,
        # artifacts are private: downloads go through the views (owner checks, ETag, ranges)
        "default_acl": None,
        "querystring_auth": True,
        "addressing_style": None if style == "auto" else style,
        "signature_version": "s3v4",
    }
    if endpoint:
        options["endpoint_url"] = endpoint
    region = env_str("PADDOCK_S3_REGION", "")
    if region:
        options["region_name"] = region
    return options


def storage_kind() -> str:
    """``local`` or ``s3`` (``PADDOCK_STORAGE``).

    Raises:
        SettingsError: any other value.
    """
    kind = (env_str("PADDOCK_STORAGE", "local") or "local").lower()
    if kind not in KINDS:
        raise SettingsError(f"PADDOCK_STORAGE: expected local or s3, got {kind!r}")
    return kind


def storages(*, artifacts_dir: Path, uploads_dir: Path) -> dict[str, dict[str, Any]]:
    """Django's ``STORAGES``: ``default`` (artifacts), ``uploads`` (users' data files) and
    ``staticfiles``.

    Local: the folders ``artifacts_dir`` and ``uploads_dir``. S3: the bucket's root (or
    ``PADDOCK_S3_PREFIX/``) and ``uploads/`` under it.

    Raises:
        SettingsError: a bad ``PADDOCK_STORAGE`` or S3 setting, naming the variable.
    """
    static = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    if storage_kind() == "s3":
        s3 = "storages.backends.s3.S3Storage"
        return {
            "default": {"BACKEND": s3, "OPTIONS": _s3_options()},
            "uploads": {"BACKEND": s3, "OPTIONS": _s3_options("uploads")},
            "staticfiles": static,
        }
    local = "django.core.files.storage.FileSystemStorage"
    return {
        "default": {"BACKEND": local, "OPTIONS": {"location": str(artifacts_dir)}},
        "uploads": {"BACKEND": local, "OPTIONS": {"location": str(uploads_dir)}},
        "staticfiles": static,
    }
