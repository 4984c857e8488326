"""Usage over time (SPEC W10): one page, thin (``studio.usage_over_time`` reads)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from studio import session_list, usage_over_time


@require_GET
def usage_page(request: HttpRequest) -> HttpResponse:
    try:
        days = int(request.GET.get("days", "30"))
    except ValueError:
        days = 30
    staff = bool(request.user.is_staff)
    user = (request.GET.get("user") or "")[:150] if staff else ""
    context = usage_over_time.usage_page(request.user, days=days, user=user)
    context.update({"staff": staff, "user_filter": user, "usernames": session_list.usernames() if staff else []})
    return render(request, "studio/usage.html", context)
