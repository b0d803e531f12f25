"""The form of the New study page: a task, a budget and the plan; the service checks the plan
against the data and names the field at fault."""

from __future__ import annotations

from django import forms

from webapp.runs.models import ClusterBudget, Task
from webapp.studies.services import MOST


class StudyForm(forms.Form):
    task = forms.ModelChoiceField(queryset=Task.objects.none())
    budget = forms.ModelChoiceField(queryset=ClusterBudget.objects.none(), help_text="its limits are copied")
    name = forms.CharField(max_length=200, required=False)
    start = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), help_text="the first fold trains from it")
    end = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), help_text="the last test span ends on it")
    first_test_year = forms.IntegerField(min_value=1900, max_value=2200)
    fold_years = forms.IntegerField(min_value=1, max_value=10, initial=1)
    validation_days = forms.IntegerField(min_value=20, max_value=2520, initial=252, help_text="trading days")
    gap_days = forms.IntegerField(min_value=0, max_value=252, initial=5, help_text="purge/embargo, trading days")
    num_pods = forms.IntegerField(min_value=1, max_value=64, initial=2, help_text="pods of each fold's run")
    generation_steps = forms.IntegerField(min_value=1, max_value=MOST["generation_steps"], initial=50_000)
    env_steps_per_fold = forms.IntegerField(min_value=1, max_value=MOST["env_steps_per_fold"], initial=500_000)
    seed = forms.IntegerField(min_value=0, max_value=MOST["seed"], initial=0)

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["task"].queryset = Task.objects.filter(owner=user).order_by("-created_at")
        self.fields["budget"].queryset = ClusterBudget.objects.filter(owner=user)
