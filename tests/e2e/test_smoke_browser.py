"""Smoke test of the browser harness: log in through the real server, see the dashboard."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_user_logs_in_and_sees_an_empty_dashboard(page, e2e_user, login, screenshot):
    page.goto("/")
    # Anonymous visitors land on the login form.
    expect(page.locator("h1")).to_have_text("Log in to Paddock")

    login(page, e2e_user)

    expect(page.locator("h1")).to_have_text("Dashboard")
    expect(page.locator("#dashboard")).to_contain_text("No runs yet.")
    expect(page.locator(".who")).to_have_text(e2e_user.username)
    path = screenshot(page, "dashboard-empty")
    assert path.stat().st_size > 1000


def test_wrong_password_keeps_the_user_on_the_login_form(page, e2e_user):
    page.goto("/accounts/login/")
    page.fill("#id_username", e2e_user.username)
    page.fill("#id_password", "not-the-password")
    page.click("#login-form button[type=submit]")

    expect(page.locator(".error")).to_contain_text("didn't match")
    assert "/accounts/login/" in page.url
