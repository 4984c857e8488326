"""Reads for the operator's sessions list (SPEC W9): search, filters, sort and one page.

A person lists their own main sessions and forks (a subagent is reached from its parent); staff
may also list someone else's, or everyone's — read-only rows (a session's page stays its
owner's). Search matches the title or any prompt of the session (``Run.prompt``, one
``EXISTS`` per row, so a session with many turns is not counted twice); archived sessions are
listed only when asked for. Each query is one indexed ``WHERE owner = … AND archived = …``
(``studio_sess_list_*``) plus the page's rows: 10,000 sessions stay fast
(``bench/sessions_list.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.core.paginator import Page, Paginator
from django.db.models import Exists, F, OuterRef, Q, QuerySet

from studio.models import RegisteredModel, Run, SessionKind, SessionStatus, StudioSession

PAGE_SIZE = 50
SORTS = {
    "activity": ("-last_activity", "-created_at"),
    "tokens": ("-tokens", "-last_activity"),
    "cost": ("-cost", "-last_activity"),
}
STATUS_CHOICES = [("", "Any status"), *SessionStatus.choices, ("archived", "Archived")]
SORT_CHOICES = [("activity", "Last activity"), ("tokens", "Tokens"), ("cost", "Cost")]
EVERYONE = "*"


class SessionListForm(forms.Form):
    """The list's query string. Bad values fall back to the defaults (a link is never an error)."""

    q = forms.CharField(required=False, max_length=200)
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES)
    model = forms.TypedChoiceField(required=False, coerce=int, empty_value=None, choices=[])
    user = forms.CharField(required=False, max_length=150)  # staff only: a username, or "*"
    sort = forms.ChoiceField(required=False, choices=SORT_CHOICES)
    page = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args: Any, staff: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        models = RegisteredModel.objects.order_by("name").values_list("pk", "name")
        self.fields["model"].choices = [("", "Any model"), *models]
        if not staff:
            del self.fields["user"]


@dataclass(slots=True)
class ListQuery:
    q: str = ""
    status: str = ""
    model: int | None = None
    user: str = ""  # "" = me, "*" = everyone, else a username (staff only)
    sort: str = "activity"
    page: int = 1

    @classmethod
    def parse(cls, data: Any, *, staff: bool) -> tuple[ListQuery, SessionListForm]:
        form = SessionListForm(data, staff=staff)
        form.is_valid()
        clean = {name: value for name, value in form.cleaned_data.items() if name not in form.errors}
        query = cls(
            q=str(clean.get("q") or "").strip(),
            status=str(clean.get("status") or ""),
            model=clean.get("model"),
            user=str(clean.get("user") or "") if staff else "",
            sort=str(clean.get("sort") or "activity"),
            page=int(clean.get("page") or 1),
        )
        return query, form


def sessions_for(viewer: Any, query: ListQuery) -> QuerySet[StudioSession]:
    """The sessions ``viewer`` may list that match ``query``, sorted."""
    rows = StudioSession.objects.exclude(kind=SessionKind.SUBAGENT)
    if query.user == EVERYONE and viewer.is_staff:
        pass
    elif query.user and viewer.is_staff:
        rows = rows.filter(owner__username=query.user)
    else:
        rows = rows.filter(owner=viewer)
    rows = rows.filter(archived=query.status == "archived")
    if query.status and query.status != "archived":
        rows = rows.filter(status=query.status)
    if query.model is not None:
        rows = rows.filter(Q(registered_model_id=query.model) | Q(root__registered_model_id=query.model))
    if query.q:
        prompts = Run.objects.filter(session=OuterRef("pk"), prompt__icontains=query.q)
        rows = rows.filter(Q(title__icontains=query.q) | Exists(prompts))
    if query.sort == "tokens":
        rows = rows.annotate(
            tokens=F("input_tokens") + F("cached_input_tokens") + F("cache_creation_tokens") + F("output_tokens")
        )
    return rows.select_related("registered_model", "root", "owner").order_by(*SORTS.get(query.sort, SORTS["activity"]))


def page_of(viewer: Any, query: ListQuery) -> Page[StudioSession]:
    paginator = Paginator(sessions_for(viewer, query), PAGE_SIZE)
    return paginator.get_page(query.page)


def forks_of(session: StudioSession) -> list[StudioSession]:
    """The other views of a main session's store (forks and subagents), listed with it."""
    if session.kind != SessionKind.MAIN:
        return []
    return list(StudioSession.objects.filter(root=session).order_by("target_id"))


def usernames() -> list[str]:
    """Who staff may filter by (people who have sessions)."""
    users = get_user_model().objects.filter(studio_sessions__isnull=False).distinct().order_by("username")
    return [str(u.get_username()) for u in users]


def owners_of(session_ids: list[str]) -> dict[str, int]:
    """Each session's owner (where its live status goes)."""
    return {
        str(pk): int(owner)
        for pk, owner in StudioSession.objects.filter(pk__in=session_ids).values_list("pk", "owner_id")
    }
