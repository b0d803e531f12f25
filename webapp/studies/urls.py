"""Page URLs of the studies app (namespace ``studies``)."""

from django.urls import path

from webapp.studies import views

app_name = "studies"

urlpatterns = [
    path("studies/", views.study_list, name="study-list"),
    path("studies/new/", views.study_new, name="study-new"),
    path("studies/<int:study_id>/", views.study_detail, name="study-detail"),
    path("studies/<int:study_id>/cancel/", views.study_cancel, name="study-cancel"),
]
