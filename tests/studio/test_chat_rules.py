"""Issue #27, the chat's rules: what the composer accepts and offers, what a new demo session
gets, what the sessions list and header say (W13, W14, P2, I1, P3).

Real parts where there are any: Django forms on real uploads, a real TCP connect for the
endpoint check, agentcore's own model resolution for what a model can do.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.datastructures import MultiValueDict

from agentcore.demo import DEMO_FILES, DEMO_PROMPTS
from agentcore.inputs import MAX_IMAGE_BYTES
from studio.templatetags.studio_tags import money, safe_href, seconds

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _form(prompt: str, *files: SimpleUploadedFile) -> Any:
    from studio.forms import PromptForm

    return PromptForm({"prompt": prompt}, MultiValueDict({"images": list(files)}))


# --- the composer's images (I1) ------------------------------------------------------------------


def test_a_prompt_with_only_images_is_a_turn_and_an_empty_one_is_not() -> None:
    """I1: the prompt may be empty when images are attached; they go to the runtime as
    ``{data, mime_type}`` with the type read from their bytes, not from the upload's name."""
    form = _form("", SimpleUploadedFile("shot.jpg", PNG, content_type="image/jpeg"))
    assert form.is_valid(), form.errors
    assert form.cleaned_data["images"] == [{"data": base64.b64encode(PNG).decode(), "mime_type": "image/png"}]
    empty = _form("   ")
    assert not empty.is_valid() and "Write a message first." in str(empty.errors)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([("notes.txt", b"plain text, not an image")], "'notes.txt' is not a PNG, JPEG, GIF or WebP image."),
        ([("big.png", PNG + b"\0" * MAX_IMAGE_BYTES)], "Image 'big.png' is 20.0 MB: the limit is 20 MB per image."),
        ([(f"p{n}.png", PNG) for n in range(5)], "At most 4 images per message (5 attached)."),
    ],
)
def test_images_over_the_runtimes_limits_are_a_clear_error(files: list[tuple[str, bytes]], message: str) -> None:
    """I1: the runtime's limits (PNG/JPEG/GIF/WebP by content, 20 MB each) and Studio's four
    per message, each refused with a message naming the file and the limit."""
    form = _form("look", *(SimpleUploadedFile(name, data, content_type="image/png") for name, data in files))
    assert not form.is_valid()
    assert message in " ".join(form.errors["images"])  # the error names its field


def test_the_picker_offers_the_types_the_runtime_accepts() -> None:
    from agentcore.inputs import IMAGE_MIME_TYPES
    from studio import forms

    assert forms.IMAGE_ACCEPT == "image/png,image/jpeg,image/gif,image/webp" == ",".join(IMAGE_MIME_TYPES)


# --- what a model can do, as the runtime resolves it ----------------------------------------------


@pytest.mark.django_db
def test_capabilities_follow_the_runtime_and_say_why_search_is_off() -> None:
    """P2/M2: search is offered where the API kind has a search tool; elsewhere the reason is
    the runtime's own ``input_validation`` message. Reasoning and image input come from the
    attributes, then the catalog, then the fallback."""
    from agentcore.config import resolve_web_search
    from agentcore.errors import InputValidationError
    from agentcore.models import resolve_model
    from studio.model_capabilities import capabilities
    from studio.models import RegisteredModel

    def model(**fields: Any) -> RegisteredModel:
        base = {"name": "m", "provider": "custom", "model_id": "m", "base_url": "http://127.0.0.1:9/v1"}
        return RegisteredModel(**(base | fields))

    completions = capabilities(model(api_kind="openai-completions"))
    with pytest.raises(InputValidationError) as runtime_says:
        resolve_web_search(
            True,
            resolve_model(
                provider="custom", model="m", base_url="http://x", api_key="k", api_kind="openai-completions"
            ),
        )
    assert completions.web_search_refusal == runtime_says.value.message
    plain = capabilities(model(api_kind="openai-responses", attributes={"reasoning": False, "input": ["text"]}))
    assert (plain.reasoning, plain.images, plain.web_search_refusal, plain.web_search_default) == (
        False,
        False,
        "",
        False,
    )
    declared_off = capabilities(model(api_kind="openai-responses", attributes={"web_search": False}))
    assert "declares web_search: false" in declared_off.web_search_refusal
    demo = capabilities(RegisteredModel(name="demo", provider="demo"))
    assert (demo.reasoning, demo.images, demo.web_search_default, demo.web_search_refusal) == (True, True, True, "")


# --- the demo, integrated (P3) -------------------------------------------------------------------


@pytest.mark.django_db
def test_a_new_demo_session_in_a_fresh_workspace_is_seeded_and_no_other(
    user: Any, demo_model: Any, tmp_path: Path
) -> None:
    """P3: a workspace Studio makes for a demo session gets the demo's sample files; a folder
    the person picked, or a session on another model, is left as it is."""
    from studio import services
    from studio.models import RegisteredModel

    options = {"permission_policy": "workspace", "effort": "medium", "mode": "build", "tool_isolation": "host"}
    fresh = services.session_create(owner=user, registered_model=demo_model, workdir="", **options)
    assert sorted(str(p.relative_to(fresh.workdir)) for p in Path(fresh.workdir).rglob("*") if p.is_file()) == sorted(
        DEMO_FILES
    )
    picked = tmp_path / "mine"
    picked.mkdir()
    services.session_create(owner=user, registered_model=demo_model, workdir=str(picked), **options)
    assert list(picked.iterdir()) == []
    other = RegisteredModel.objects.create(name="Real", provider="custom", model_id="m", base_url="http://127.0.0.1:9")
    real = services.session_create(owner=user, registered_model=other, workdir="", **options)
    assert list(Path(real.workdir).iterdir()) == []


def test_every_demo_prompt_is_offered_or_says_what_to_turn_on() -> None:
    """P3: with code mode, the example extension and web search, every prompt is offered (in
    its mode); without them the prompts that need them say what to turn on instead."""
    from studio.demo_prompts import suggestions

    full = {"records": {"extensions": [{"tools": ["start_timer", "run_example_tasks"]}], "code_mode": {"on": 1}}}
    offered = suggestions(full, web_search=True)
    assert [s.prompt for s in offered] == [p.prompt for p in DEMO_PROMPTS]
    assert all(not s.missing for s in offered)
    assert [s.mode for s in offered if s.mode == "plan"] == ["plan"]
    bare = {s.prompt: s.missing for s in suggestions({"records": {}}, web_search=False)}
    assert "STUDIO_CODE_MODE" in bare["Run a code-mode script that counts the files."]
    assert "web search" in bare["Search the web for durable agent runtimes."]
    assert "example extension" in bare["Start a timer for 30 seconds."]
    assert bare["What files are here? Read the README."] == ""


# --- the endpoint check of the new-session form (W14) ---------------------------------------------


@pytest.mark.django_db
async def test_the_endpoint_check_reports_a_refused_port_at_once_and_an_open_one_as_working() -> None:
    from studio.endpoint_check import check_endpoint
    from studio.models import RegisteredModel

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    dead = RegisteredModel(name="dead", provider="custom", model_id="m", base_url=f"http://127.0.0.1:{closed}/v1")
    started = time.monotonic()
    check = await check_endpoint(dead)
    assert time.monotonic() - started < 1.0
    assert not check.ok and check.message.startswith(f"Cannot connect to 127.0.0.1:{closed}: connection refused")
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        alive = RegisteredModel(name="up", provider="custom", model_id="m", base_url=f"http://127.0.0.1:{port}/v1")
        check = await check_endpoint(alive)
    finally:
        server.close()
        await server.wait_closed()
    assert check.ok and check.message.startswith(f"127.0.0.1:{port} accepts connections")
    assert (await check_endpoint(RegisteredModel(name="d", provider="demo"))).ok


# --- small things people noticed -------------------------------------------------------------------


def test_costs_keep_two_significant_digits_whatever_their_size() -> None:
    """The header said "$0.0070" and then "$0.01": one rule now, no jump at a cent."""
    assert [money(v) for v in ("0", "0.0070", "0.0098", "0.0102", "0.456", "1.234", "1234.5")] == [
        "$0",
        "$0.0070",
        "$0.0098",
        "$0.010",
        "$0.46",
        "$1.23",
        "$1,234.50",
    ]


def test_links_and_delays_are_shown_safely() -> None:
    assert safe_href("https://example.org/a") == "https://example.org/a"
    assert safe_href("javascript:alert(1)") == "" and safe_href(" JAVASCRIPT:x") == "" and safe_href("data:x") == ""
    assert [seconds(v) for v in (4, 0.5, 8.0, "x")] == ["4 s", "0.5 s", "8 s", ""]


@pytest.mark.django_db
def test_the_login_page_names_the_command_a_newcomer_ran(client: Any) -> None:
    page = client.get("/login/").content.decode()
    assert "<code>python3 dev.py studio</code>" in page and "initial-login.txt" in page


def test_a_validation_only_forms_choice_fields_are_shared_not_copied_and_refuse_as_django_does() -> None:
    """Issue 25: a composer message's form shares its choice fields' choices and widgets with
    the declaration (``FixedChoiceField``) instead of deep-copying them at every prompt; a
    form's own error messages stay its own, and a bad choice is refused in Django's words."""
    from django import forms

    from studio.forms import FixedChoiceField, PromptForm

    one, two = PromptForm({"prompt": "hi", "agent": "build"}), PromptForm({"prompt": "hi", "agent": "nope"})
    declared = PromptForm.base_fields["agent"]
    assert isinstance(declared, FixedChoiceField)
    assert one.fields["agent"] is not declared and one.fields["agent"] is not two.fields["agent"]
    assert one.fields["agent"].choices is declared.choices and one.fields["agent"].widget is declared.widget
    one.fields["agent"].error_messages["invalid_choice"] = "changed for this form only"
    assert declared.error_messages["invalid_choice"] != "changed for this form only"
    assert one.is_valid() and one.cleaned_data["agent"] == "build"
    plain = forms.ChoiceField(choices=declared.choices, required=False)
    with pytest.raises(forms.ValidationError) as expected:
        plain.clean("nope")
    assert not two.is_valid() and two.errors["agent"] == expected.value.messages
