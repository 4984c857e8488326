"""URL map: pages and htmx endpoints under one ``studio`` namespace, plus the Django admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from studio import views

app_patterns = (
    [
        path("", views.session_list, name="session_list"),
        path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
        path("logout/", auth_views.LogoutView.as_view(), name="logout"),
        path("sessions/new/", views.session_create, name="session_create"),
        path("sessions/<uuid:session_id>/", views.session_detail, name="session_detail"),
        path("sessions/<uuid:session_id>/prompt/", views.session_prompt, name="session_prompt"),
        path("sessions/<uuid:session_id>/stop/", views.session_stop, name="session_stop"),
        path("sessions/<uuid:session_id>/plan/", views.session_plan, name="session_plan"),
        path("sessions/<uuid:session_id>/answer/", views.session_answer, name="session_answer"),
    ],
    "studio",
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include(app_patterns)),
]
