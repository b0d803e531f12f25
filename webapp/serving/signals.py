"""Invalidation of the serving cache (``webapp/serving/cache.py``) when what it holds changes.

Connected in ``ServingConfig.ready``. Queryset ``update()`` calls send no signal; the entries
they would make stale expire after ``cache.TTL_S`` (no code updates the fields cached here
that way). A run's owner never changes, and deleting a run deletes its agents one signal each.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from webapp.runs.models import Agent
from webapp.serving import cache
from webapp.serving.models import ServeToken


def serve_token_changed(sender, instance: ServeToken, **kwargs) -> None:
    """A serve token revoked (deleted) or changed (its agent limit): forget its credential."""
    cache.invalidate_credentials([instance.key])


def account_token_deleted(sender, instance: Token, **kwargs) -> None:
    """An account token deleted (regenerated, or its user deleted)."""
    cache.invalidate_credentials([instance.key])


def user_saved(sender, instance, created: bool = False, update_fields=None, **kwargs) -> None:
    """A user saved (e.g. deactivated): forget the credentials of all their tokens. A new user
    has none, and a login only writes ``last_login``, which no credential holds."""
    if created or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return
    keys = [*ServeToken.objects.filter(owner_id=instance.pk).values_list("key", flat=True)]
    keys += Token.objects.filter(user_id=instance.pk).values_list("key", flat=True)
    cache.invalidate_credentials(keys)


def agent_changed(sender, instance: Agent, **kwargs) -> None:
    """An agent saved or deleted: forget its entry (owner, bundle)."""
    cache.invalidate_agents([instance.pk])


def connect() -> None:
    from django.db.models.signals import post_delete, post_save

    for signal in (post_save, post_delete):
        signal.connect(serve_token_changed, sender=ServeToken, dispatch_uid=f"serving.token.{signal}")
        signal.connect(agent_changed, sender=Agent, dispatch_uid=f"serving.agent.{signal}")
    post_delete.connect(account_token_deleted, sender=Token, dispatch_uid="serving.account_token")
    post_save.connect(user_saved, sender=get_user_model(), dispatch_uid="serving.user")
