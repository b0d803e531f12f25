from django.urls import path

from webapp.serving import views

app_name = "serving"

urlpatterns = [
    path("account/serve-tokens/", views.serve_tokens, name="tokens"),
]
