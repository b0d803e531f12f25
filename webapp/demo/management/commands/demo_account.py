"""``manage.py demo_account``: create (or refresh) the demo login and print it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction


def _demo_password() -> str:
    # One password per checkout, kept under var/ (owner-readable only) so that the login the
    # launcher printed last time keeps working; PADDOCK_DEMO_PASSWORD overrides it.
    configured = os.environ.get("PADDOCK_DEMO_PASSWORD", "").strip()
    if configured:
        return configured
    path = Path(settings.VAR_DIR) / "demo_password"
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(secrets.token_urlsafe(9))
        tmp.chmod(0o600)
        tmp.replace(path)
    return path.read_text().strip()


class Command(BaseCommand):
    help = "Create the demo user (or reset its password) and print the login."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="demo", help="login name (default: demo)")

    def handle(self, *args, username: str, **options) -> None:
        password = _demo_password()
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            user.set_password(password)
            user.is_active = True
            user.save()
        verb = "created" if created else "ready"
        self.stdout.write(f"demo account {verb}: username {username}  password {password}")
