"""Django admin: registered models (secrets write-only) and session stores.

The API key field is a ``PasswordInput`` that never renders the stored value back; leaving it
blank keeps the current key, and a "clear" checkbox removes it. The key is stored encrypted
(``studio.credentials``). Attributes are validated by
agentcore's own strict parser (SPEC M3), and its error names the offending field.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from asgiref.sync import async_to_sync
from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.template.response import TemplateResponse
from django.urls import reverse

from studio import store_admin
from studio.models import Approval, RegisteredModel, Run, SessionStore, StudioSession, ToolCall, UsageRecord
from studio.stores import location_of


class RegisteredModelForm(forms.ModelForm):
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        max_length=2000,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only: the stored key is never shown. Leave blank to keep the current key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    base_url = forms.URLField(label="base URL", required=False, max_length=500, assume_scheme="https")
    attributes = forms.CharField(
        label="Attributes (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "class": "vLargeTextField", "spellcheck": "false"}),
        help_text='e.g. {"context_window": 200000, "cost": {"input": 3, "output": 15, "cache_read": 0.3, '
        '"cache_write": 3.75}}. Unknown keys are rejected.',
    )

    class Meta:
        model = RegisteredModel
        fields = (
            "name",
            "provider",
            "model_id",
            "base_url",
            "api_kind",
            "api_key",
            "attributes",
            "enabled",
            "tool_isolation",
        )
        labels: ClassVar[dict[str, str]] = {"api_kind": "API kind"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initial["api_key"] = ""
        value = self.instance.attributes if self.instance and self.instance.pk else None
        self.initial["attributes"] = json.dumps(value, indent=2) if value else ""

    def clean_api_key(self) -> str:
        new = self.cleaned_data.get("api_key") or ""
        if new:
            return new
        return self.instance.api_key if self.instance and self.instance.pk else ""

    def clean_attributes(self) -> dict[str, Any]:
        """Strict validation (SPEC M3) reporting *every* bad field at once.

        ``agentcore.parse_model_attributes`` stops at the first error (right for a CLI flag);
        an admin fixing a form wants them all, so the pydantic model is validated here and
        each of its errors becomes one message naming its field.
        """
        raw = (self.cleaned_data.get("attributes") or "").strip()
        if not raw:
            return {}
        from pydantic import ValidationError

        from agentcore.models.attributes import ModelAttributes

        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"attributes is not valid JSON: {exc.msg} (line {exc.lineno})") from exc
        if not isinstance(data, dict):
            raise forms.ValidationError("attributes must be a JSON object.")
        try:
            parsed = ModelAttributes.model_validate(data)
        except ValidationError as exc:
            raise forms.ValidationError([_attribute_error(error) for error in exc.errors()]) from exc
        return parsed.model_dump(exclude_none=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("clear_api_key"):
            data["api_key"] = ""
        provider = data.get("provider")
        if provider == "custom" and not data.get("base_url"):
            self.add_error("base_url", "A custom endpoint needs a base URL.")
        if provider not in ("demo", None) and not data.get("model_id"):
            self.add_error("model_id", "Name the model id (e.g. gpt-5-mini or claude-sonnet-4-5).")
        return data

    def save(self, commit: bool = True) -> RegisteredModel:
        instance: RegisteredModel = super().save(commit=False)
        instance.api_key = self.cleaned_data.get("api_key") or ""
        instance.attributes = self.cleaned_data.get("attributes") or {}
        if commit:
            instance.save()
        return instance


def _attribute_error(error: Any) -> forms.ValidationError:
    """One pydantic error as ``attributes.<field>: <message>``."""
    loc = ".".join(str(part) for part in error.get("loc") or ())
    name = f"attributes.{loc}" if loc else "attributes"
    return forms.ValidationError(f"{name}: {error.get('msg')}")


#: "Test connection" answers within this many seconds, whatever the endpoint does.
PROBE_TIMEOUT_S = 12.0


async def _probe_model(model: RegisteredModel) -> tuple[bool, str]:
    """One tiny prompt against the model in a throwaway in-memory runtime; (works, reason).

    A probe must answer while the admin waits, so it does not use the run's retry budget
    (10 attempts with backoff, about a minute when the network is down): the first failure
    that would be retried ends the probe with its reason, and the whole probe is bounded by
    ``PROBE_TIMEOUT_S`` (an endpoint that accepts the connection and never answers).
    """
    from agentcore import AgentHost, create_agent
    from agentcore.inputs import AgentInput

    timeout = PROBE_TIMEOUT_S
    abort = asyncio.Event()
    failure = ""
    with tempfile.TemporaryDirectory() as workdir:
        runtime = await create_agent(workdir=workdir, permission_policy="read-only", **model.runtime_options())
        try:
            async with asyncio.timeout(timeout):
                probe = AgentInput(prompt="Reply with the single word OK.", effort="off")
                async for event in runtime.run(probe, host=AgentHost(abort_signal=abort)):
                    if event.type == "retry" and not failure:
                        failure = f"the endpoint did not answer: {event.reason}"
                        abort.set()  # ends the run at once instead of backing off and retrying
                    elif event.type == "end":
                        if event.status == "completed":
                            return True, ""
                        return False, failure or event.error or event.status
        except TimeoutError:
            return False, failure or f"no answer within {timeout:g} s"
        finally:
            await runtime.close()
    return False, failure or "the run ended without a result"


@admin.action(description="Test connection (one tiny prompt)")
def test_connection(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[RegisteredModel]) -> None:
    for model in queryset:
        started = time.monotonic()
        try:
            ok, error = async_to_sync(_probe_model)(model)
        except Exception as exc:
            ok, error = False, f"{exc.__class__.__name__}: {getattr(exc, 'message', None) or exc}"
        took = f"{time.monotonic() - started:.1f} s"
        if ok:
            modeladmin.message_user(request, f"{model.display_name}: connection works ({took}).", messages.SUCCESS)
        else:
            modeladmin.message_user(
                request, f"{model.display_name}: connection failed after {took} — {error[:300]}", messages.ERROR
            )


@admin.register(RegisteredModel)
class RegisteredModelAdmin(admin.ModelAdmin):
    form = RegisteredModelForm
    list_display = ("name", "provider", "model_id", "api_kind_shown", "key_set", "enabled")
    list_filter = ("provider", "enabled")
    search_fields = ("name", "model_id")
    actions = (test_connection,)
    fieldsets = (
        (None, {"fields": ("name", "provider", "model_id", "enabled")}),
        ("Endpoint", {"fields": ("base_url", "api_kind", "api_key", "clear_api_key")}),
        ("Attributes", {"fields": ("attributes",)}),
        ("Tools", {"fields": ("tool_isolation",)}),
    )

    @admin.display(boolean=True, description="API key set")
    def key_set(self, obj: RegisteredModel) -> bool:
        return bool(obj.api_key)

    @admin.display(description="API kind", ordering="api_kind")
    def api_kind_shown(self, obj: RegisteredModel) -> str:
        return obj.get_api_kind_display() or "provider default"


def _exports_dir() -> Path:
    path = Path(settings.STUDIO_DATA_DIR) / "exports"
    path.mkdir(parents=True, exist_ok=True)
    return path


@admin.action(description="Export a consistent copy of the store")
def export_store(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SessionStore]) -> None:
    for store in queryset:
        if not location_of(store).exists():
            modeladmin.message_user(request, f"{store}: this session has no store yet.", messages.WARNING)
            continue
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        destination = _exports_dir() / f"{store.pk}-{stamp}.sqlite"
        try:
            store_admin.store_export(str(store.pk), destination)
        except store_admin.StoreAdminError as exc:
            modeladmin.message_user(request, f"{store}: export failed. {exc}", messages.ERROR)
        else:
            modeladmin.message_user(request, f"{store}: exported to {destination}", messages.SUCCESS)


def _release_from_host(session_id: str) -> str:
    """Ask the session host to close an idle runtime so the store's owner lock is free.

    Returns an error message when a run is in progress ("" otherwise). A host that does not
    answer (worker mode, no worker) holds nothing: the owner lock decides in the end.
    """
    from studio.host.contract import HostError
    from studio.host.routing import get_host_client

    try:
        async_to_sync(get_host_client().call)("release", session_id)
    except HostError as exc:
        if exc.code == "busy":
            return exc.message
    return ""


@admin.action(description="Cancel unfinished work offline")
def cancel_offline(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[SessionStore]) -> None:
    for store in queryset:
        busy = _release_from_host(str(store.pk))
        if busy:
            modeladmin.message_user(request, f"{store}: {busy}", messages.ERROR)
            continue
        try:
            result = store_admin.store_cancel_offline(store)
        except store_admin.StoreAdminError as exc:
            modeladmin.message_user(request, f"{store}: cancel failed. {exc}", messages.ERROR)
            continue
        ended = len(result.get("cancelled_requests", []))
        tasks = len(result.get("aborted_tasks", [])) + len(result.get("orphaned_tasks", []))
        if ended or tasks:
            text = f"{store}: cancelled {ended} unfinished run{'s' if ended != 1 else ''}"
            text += f" and ended {tasks} task{'s' if tasks != 1 else ''}." if tasks else "."
        else:
            text = f"{store}: nothing was unfinished."
        modeladmin.message_user(request, text, messages.SUCCESS)


class StoreImportForm(forms.Form):
    """Where the exported store comes from, and which session receives it."""

    source_file = forms.FileField(label="Upload a store", required=False, help_text="An exported .sqlite store.")
    source_path = forms.CharField(
        label="…or a path on the server",
        required=False,
        max_length=1000,
        widget=forms.TextInput(attrs={"class": "vTextField", "placeholder": "/srv/backups/session.sqlite"}),
    )
    session = forms.ModelChoiceField(
        label="Restore into",
        queryset=StudioSession.objects.none(),
        required=False,
        empty_label="A new session",
        help_text="An existing session whose store file is missing. The target is never overwritten.",
    )
    owner = forms.ModelChoiceField(
        label="Owner (new session)",
        queryset=get_user_model().objects.none(),
        required=False,
        help_text="Blank = you.",
    )
    registered_model = forms.ModelChoiceField(
        label="Model (new session)",
        queryset=RegisteredModel.objects.none(),
        required=False,
        empty_label="The model the store was used with",
        help_text="Blank = the registered model whose id the store's usage names (else the offline demo).",
    )
    title = forms.CharField(
        label="Title (new session)", required=False, max_length=200, help_text="Blank = the store's first prompt."
    )
    workdir = forms.CharField(
        label="Working directory (new session)",
        required=False,
        max_length=1000,
        help_text="Blank = a fresh folder for the session.",
        widget=forms.TextInput(attrs={"class": "vTextField"}),
    )

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        sessions = StudioSession.objects.select_related("owner").order_by("-last_activity")
        self.fields["session"].queryset = sessions
        self.fields["owner"].queryset = get_user_model().objects.order_by("username")
        self.fields["owner"].initial = getattr(user, "pk", None)
        self.fields["registered_model"].queryset = RegisteredModel.objects.filter(enabled=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        has_file, has_path = bool(data.get("source_file")), bool((data.get("source_path") or "").strip())
        if has_file == has_path:
            raise forms.ValidationError("Give exactly one source: upload a file or type a path on the server.")
        if not data.get("session") and not data.get("owner"):
            if self.user is None:
                self.add_error("owner", "Choose who owns the new session.")
            data["owner"] = self.user  # the admin importing it
        return data


class SessionTitleAdmin(admin.ModelAdmin):
    """One title everywhere: the list and the change page show the same thing for a session
    that no prompt has named yet (its fallback name, marked untitled)."""

    @admin.display(description="Title", ordering="title")
    def title_shown(self, obj: StudioSession) -> str:
        return obj.title or _untitled(obj)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        title = form.base_fields.get("title")
        if title is not None and obj is not None:
            title.widget.attrs["placeholder"] = _untitled(obj)
            title.help_text = "Empty until the first prompt names the session."
        return form


def _untitled(obj: StudioSession) -> str:
    return f"{obj} (untitled)"


@admin.register(SessionStore)
class SessionStoreAdmin(SessionTitleAdmin):
    list_display = ("title_shown", "owner", "status", "store_file", "store_size", "last_activity")
    list_filter = ("status",)
    search_fields = ("title", "store_path", "owner__username")
    actions = (export_store, cancel_offline)
    readonly_fields = ("owner", "registered_model", "workdir", "store_path", "status", "created_at", "last_activity")
    fields = (*readonly_fields, "title")
    change_list_template = "admin/studio/sessionstore/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[SessionStore]:
        """One row per store: forks and subagents are conversations of their main session's store."""
        return super().get_queryset(request).filter(kind="main")

    def get_urls(self) -> list[Any]:
        from django.urls import path

        custom = [
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="studio_sessionstore_import",
            )
        ]
        return custom + super().get_urls()

    def import_view(self, request: HttpRequest) -> HttpResponse:
        """Import an exported store (``agentcore.import_agent_database``) as a session."""
        if not self.has_change_permission(request):
            raise PermissionDenied
        form = StoreImportForm(request.POST or None, request.FILES or None, user=request.user)
        if request.method == "POST" and form.is_valid():
            try:
                session = self._import(form.cleaned_data)
            except store_admin.StoreAdminError as exc:
                form.add_error(None, str(exc))
            else:
                self.message_user(request, f"Imported the store into “{session}”.", messages.SUCCESS)
                return HttpResponseRedirect(reverse("admin:studio_sessionstore_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "title": "Import a session store",
            "form": form,
            "opts": self.model._meta,
            "media": self.media + form.media,
        }
        return TemplateResponse(request, "admin/studio/sessionstore/import.html", context)

    def _import(self, data: dict[str, Any]) -> StudioSession:
        options: dict[str, Any] = {
            "session": data.get("session"),
            "owner": data.get("owner"),
            "registered_model": data.get("registered_model"),
            "title": data.get("title") or "",
            "workdir": data.get("workdir") or "",
        }
        upload = data.get("source_file")
        if upload is None:
            return store_admin.store_import(source=data["source_path"].strip(), **options)
        incoming = Path(settings.STUDIO_DATA_DIR) / "imports"
        incoming.mkdir(parents=True, exist_ok=True)
        # A private folder per upload: the copy and its lock sidecar go away together.
        with tempfile.TemporaryDirectory(dir=incoming) as folder:
            name = Path(folder) / "upload.sqlite"
            with open(name, "wb") as out:
                for chunk in upload.chunks():
                    out.write(chunk)
            return store_admin.store_import(source=name, **options)

    @admin.display(description="Store")
    def store_file(self, obj: SessionStore) -> str:
        location = location_of(obj)
        return f"PostgreSQL store {location.name}" if location.is_postgres else os.path.basename(location.path)

    @admin.display(description="Size")
    def store_size(self, obj: SessionStore) -> str:
        try:
            size = location_of(obj).size()
        except Exception:
            return "—"
        return filesizeformat(size) if size else "not created"


@admin.register(StudioSession)
class StudioSessionAdmin(SessionTitleAdmin):
    list_display = ("title_shown", "owner", "registered_model", "status", "total_tokens", "cost", "last_activity")
    list_filter = ("status", "registered_model")
    search_fields = ("title", "owner__username")
    readonly_fields = ("store_path", "created_at", "last_activity")


for _model in (Run, ToolCall, Approval, UsageRecord):
    admin.site.register(_model)
