"""Serve tokens (API keys that may only call the act endpoint) and per-agent call counts."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

#: Serve token keys start with this, so the authentication class can tell them from the
#: account tokens of ``rest_framework.authtoken`` that share the ``Authorization: Token`` header.
KEY_PREFIX = "srv_"


def new_key() -> str:
    """A fresh random key: ``srv_`` + 40 URL-safe characters (240 bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(30)


class ServeToken(models.Model):
    """A token with the ``serve`` scope: it may call ``POST /api/agents/{id}/act`` for its
    owner's agents (or only ``agent`` when set) and nothing else.

    Requests are rate-limited per token (``PADDOCK_SERVE_RATE_LIMIT`` per minute).
    """

    key = models.CharField(max_length=64, unique=True, default=new_key)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="serve_tokens")
    name = models.CharField(max_length=100, help_text="what the token is for (e.g. 'trading bot')")
    agent = models.ForeignKey(
        "runs.Agent",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="serve_tokens",
        help_text="the one agent this token may call; empty = any of the owner's agents",
    )
    calls = models.BigIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"serve token {self.name!r} of {self.owner_id}"


class AgentServeStats(models.Model):
    """How often an agent was called through the act endpoint (shown on the agent page)."""

    agent = models.OneToOneField("runs.Agent", on_delete=models.CASCADE, primary_key=True, related_name="serve_stats")
    calls = models.BigIntegerField(default=0, help_text="successful act requests")
    observations = models.BigIntegerField(default=0, help_text="observations acted on (a batch counts its rows)")
    errors = models.BigIntegerField(default=0, help_text="requests answered with a 400")
    last_called_at = models.DateTimeField(null=True, blank=True)
