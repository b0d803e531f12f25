"""Reads of budget quotas: what a user may hold in budgets of their own and what their open
own budgets hold now (the rule itself is written once, in :func:`quota_errors`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Sum

from webapp.runs.models import BudgetQuota, ClusterBudget


@dataclass(frozen=True)
class Quota:
    """A user's quota and what their open own budgets hold of it.

    Attributes:
        device_hours: device hours (GPU or CPU time) the device-hours caps of the user's open
            own budgets may add up to.
        max_concurrent_pods: pods at once their open own budgets may add up to.
        hours_held, pods_held: what those budgets hold now (ended budgets hold nothing).
        raised: whether staff set this user's quota (else it is the settings' default).
    """

    device_hours: float
    max_concurrent_pods: int
    hours_held: float
    pods_held: int
    raised: bool

    @property
    def hours_left(self) -> float:
        return max(0.0, self.device_hours - self.hours_held)

    @property
    def pods_left(self) -> int:
        return max(0, self.max_concurrent_pods - self.pods_held)

    def text(self) -> str:
        """``"2 device hours and 2 pods at once (0.5 h and 1 pod held by your open budgets)"``."""
        return (
            f"{self.device_hours:g} device hours and {self.max_concurrent_pods} pods at once "
            f"({self.hours_held:g} h and {self.pods_held} pods held by your open budgets)"
        )


def open_own_budgets(user, *, exclude_id: int | None = None):
    """The user's own budgets (``purpose="own"``) that are not ended."""
    return ClusterBudget.objects.filter(owner=user, purpose="own", ended_at__isnull=True).exclude(pk=exclude_id)


def quota_of(user, *, exclude_id: int | None = None) -> Quota:
    """The user's quota (the settings' default where staff set none) and what it holds,
    leaving out budget ``exclude_id`` (the one being changed). Two queries."""
    row = BudgetQuota.objects.filter(user=user).first()
    hours = row.device_hours if row is not None and row.device_hours is not None else None
    pods = row.max_concurrent_pods if row is not None and row.max_concurrent_pods is not None else None
    held = open_own_budgets(user, exclude_id=exclude_id).aggregate(
        hours=Sum("gpu_hours_cap"), pods=Sum("max_concurrent_pods")
    )
    return Quota(
        device_hours=float(settings.PADDOCK_QUOTA_DEVICE_HOURS if hours is None else hours),
        max_concurrent_pods=int(settings.PADDOCK_QUOTA_PODS if pods is None else pods),
        hours_held=float(held["hours"] or 0.0),
        pods_held=int(held["pods"] or 0),
        raised=hours is not None or pods is not None,
    )


def quota_errors(quota: Quota, *, gpu_hours_cap, max_concurrent_pods) -> dict[str, str]:
    """The one quota rule: an own budget needs a device-hours cap, and its cap and pods fit in
    what the quota has left. Returns ``{field: why}``, each message naming the quota."""
    fields: dict[str, str] = {}
    if gpu_hours_cap is None:
        fields["gpu_hours_cap"] = f"required for a budget of your own (your quota: {quota.text()})"
    elif isinstance(gpu_hours_cap, int | float) and gpu_hours_cap > quota.hours_left + 1e-9:
        fields["gpu_hours_cap"] = (
            f"{gpu_hours_cap:g} h is above your quota: {quota.hours_left:g} h left of {quota.text()}"
        )
    if isinstance(max_concurrent_pods, int) and max_concurrent_pods > quota.pods_left:
        fields["max_concurrent_pods"] = (
            f"{max_concurrent_pods} pods is above your quota: {quota.pods_left} left of {quota.text()}"
        )
    return fields
