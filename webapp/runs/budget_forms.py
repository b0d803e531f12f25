"""Forms of the Budgets page: a budget of one's own, raising one, and a user's quota (staff)."""

from __future__ import annotations

from django import forms

from webapp.runs import bounds
from webapp.runs.models import ClusterBudget
from webapp.runs.selectors.budgets import users_for_budgets


def apply_budget_bounds(form: forms.BaseForm) -> None:
    """The bounds the services enforce, as labels, ranges and input limits of each budget field
    the form has (a field checked here never reaches the database constraints)."""
    for name, bound in bounds.BUDGET.items():
        field = form.fields.get(name)
        if field is None:
            continue
        field.label = bound.label
        field.help_text = f"{field.help_text} {bound.text()}.".strip()
        field.validators = [*bounds.drop_range_validators(field.validators), bound.validator()]
        field.widget.attrs.update({"min": bound.low, "max": bound.high})


class OwnBudgetForm(forms.ModelForm):
    """A budget of the user's own, within their quota (the services check the quota)."""

    class Meta:
        model = ClusterBudget
        fields = ["name", "gpu_hours_cap", "max_concurrent_pods", "env_step_cap", "max_wall_clock_s", "deadline"]
        widgets = {"deadline": forms.DateTimeInput(attrs={"type": "datetime-local"})}
        help_texts = {
            "gpu_hours_cap": "GPU or CPU time the pods may train, in hours; counts against your quota.",
            "max_concurrent_pods": "Counts against your quota.",
            "env_step_cap": "Empty = no limit.",
            "max_wall_clock_s": "Empty = no limit.",
            "deadline": "UTC; empty = none.",
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, prefix="own", **kwargs)
        self.fields["gpu_hours_cap"].required = True
        apply_budget_bounds(self)


class RaiseBudgetForm(forms.Form):
    """New device-hours cap and pods at once of an open own budget."""

    budget = forms.IntegerField(widget=forms.HiddenInput)
    gpu_hours_cap = forms.FloatField(label="Device hours cap")
    max_concurrent_pods = forms.IntegerField(label="Pods at once")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, prefix="raise", **kwargs)
        apply_budget_bounds(self)


class QuotaForm(forms.Form):
    """Staff: set a user's quota for budgets of their own (empty = the default)."""

    #: The budget bound each quota field is checked against (the services' ``quota_set``).
    BOUNDS = {
        "device_hours": bounds.BUDGET["gpu_hours_cap"],
        "max_concurrent_pods": bounds.BUDGET["max_concurrent_pods"],
    }

    user = forms.ModelChoiceField(queryset=None)
    device_hours = forms.FloatField(required=False, label="Device hours at once")
    max_concurrent_pods = forms.IntegerField(required=False, label="Pods at once")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, prefix="quota", **kwargs)
        self.fields["user"].queryset = users_for_budgets()
        for name, bound in self.BOUNDS.items():
            self.fields[name].validators.append(bound.validator())
            self.fields[name].widget.attrs.update({"min": bound.low, "max": bound.high})
