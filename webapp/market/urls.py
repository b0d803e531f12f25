"""Page URLs of the market app (namespace ``market``)."""

from django.urls import path

from webapp.market import views

app_name = "market"

urlpatterns = [
    path("datasets/", views.dataset_list, name="list"),
    path("datasets/<int:dataset_id>/", views.dataset_detail, name="detail"),
]
