"""URL map: pages and htmx endpoints under one ``studio`` namespace, plus the Django admin."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from studio import list_views, trace_views, usage_views, views

app_patterns = (
    [
        path("", list_views.session_list_page, name="session_list"),
        path("usage/", usage_views.usage_page, name="usage"),
        path("sessions/<uuid:session_id>/rename/", list_views.session_rename, name="session_rename"),
        path("sessions/<uuid:session_id>/archive/", list_views.session_archive, name="session_archive"),
        path("sessions/<uuid:session_id>/delete/", list_views.session_delete, name="session_delete"),
        path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
        path("logout/", auth_views.LogoutView.as_view(), name="logout"),
        path("sessions/new/", views.session_create, name="session_create"),
        path("sessions/<uuid:session_id>/", views.session_detail, name="session_detail"),
        path("sessions/<uuid:session_id>/prompt/", views.session_prompt, name="session_prompt"),
        path("sessions/<uuid:session_id>/stop/", views.session_stop, name="session_stop"),
        path("sessions/<uuid:session_id>/plan/", views.session_plan, name="session_plan"),
        path("sessions/<uuid:session_id>/answer/", views.session_answer, name="session_answer"),
        path("sessions/<uuid:session_id>/withdraw/", views.session_withdraw, name="session_withdraw"),
        path("sessions/<uuid:session_id>/promote/", views.session_promote, name="session_promote"),
        path("sessions/<uuid:session_id>/cancel-task/", views.session_cancel_task, name="session_cancel_task"),
        path("sessions/<uuid:session_id>/fork/", views.session_fork, name="session_fork"),
        path("sessions/<uuid:session_id>/reset/", views.session_reset, name="session_reset"),
        path("sessions/<uuid:session_id>/configure/", views.session_configure, name="session_configure"),
        path("sessions/<uuid:session_id>/compact/", views.session_compact, name="session_compact"),
        path("sessions/<uuid:session_id>/resend/", views.session_resend, name="session_resend"),
        path("sessions/<uuid:session_id>/edit/", views.session_edit, name="session_edit"),
        path("sessions/<uuid:session_id>/image/", views.session_image, name="session_image"),
        path("models/check/", views.model_check, name="model_check"),
        path("sessions/<uuid:session_id>/turns/", views.session_turns, name="session_turns"),
        path("sessions/<uuid:session_id>/tasks/", views.session_tasks, name="session_tasks"),
        path(
            "sessions/<uuid:session_id>/contexts/<int:target_id>/", views.session_context, name="session_context"
        ),
        path("sessions/<uuid:session_id>/timeline/", trace_views.session_timeline, name="session_timeline"),
        path(
            "sessions/<uuid:session_id>/timeline/span/",
            trace_views.session_timeline_span,
            name="session_timeline_span",
        ),
        path(
            "sessions/<uuid:session_id>/download/<str:name>", trace_views.session_download, name="session_download"
        ),
    ],
    "studio",
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include(app_patterns)),
]
