"""``manage.py demo_account``: the login the launcher prints works, and keeps working."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command


def create_demo_account(**options) -> tuple[str, str]:
    out = io.StringIO()
    call_command("demo_account", stdout=out, **options)
    match = re.search(r"username (\S+)\s+password (\S+)", out.getvalue())
    assert match, out.getvalue()
    return match.group(1), match.group(2)


@pytest.mark.django_db
def test_demo_account_prints_a_login_that_works(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("PADDOCK_DEMO_PASSWORD", raising=False)
    settings.VAR_DIR = tmp_path

    username, password = create_demo_account()

    assert username == "demo"
    assert authenticate(username=username, password=password) is not None


@pytest.mark.django_db
def test_demo_account_keeps_its_password_across_launches(settings, tmp_path, monkeypatch):
    monkeypatch.delenv("PADDOCK_DEMO_PASSWORD", raising=False)
    settings.VAR_DIR = tmp_path

    first = create_demo_account()
    second = create_demo_account()

    assert first == second
    assert (tmp_path / "demo_password").stat().st_mode & 0o077 == 0


@pytest.mark.django_db
def test_demo_password_can_be_chosen_with_an_environment_variable(monkeypatch):
    monkeypatch.setenv("PADDOCK_DEMO_PASSWORD", "chosen-password")

    assert create_demo_account(username="guest") == ("guest", "chosen-password")
