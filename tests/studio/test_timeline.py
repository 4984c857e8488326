"""W8 in Studio: the Timeline of a session page, from the store — the same after a reload and a
restart, live while a turn runs (pushes that patch only what changed end as a fresh render), a
span's details without credentials, per-user like every page.

A real session host with real runtimes (the demo model, or the scripted code-mode model of
``tests.e2e.extras_model`` that holds its script until the test releases it).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.test import Client

from studio.host.session_host import SessionHost, set_session_host
from tests.studio.oob import apply, parse

pytestmark = pytest.mark.django_db(transaction=True)


def rows(html: str) -> list[dict[str, str]]:
    """Each Timeline row: its span id, kind, status, label and bar times."""
    out = []
    for match in re.finditer(
        r'<li id="(tl[s]?-[0-9a-f]+)" class="tl-row k-(\w+) s-(\w+)[^"]*"([^>]*)>(.*?)</li>', html
    ):
        attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', match.group(4)))
        label = re.search(r'<span class="tl-label">(.*?)</span>', match.group(5))
        out.append(
            {
                "dom": match.group(1),
                "kind": match.group(2),
                "status": match.group(3),
                "label": label.group(1) if label else "",
                **attrs,
            }
        )
    return out


def without_now(html: str) -> str:
    """A render without the server's clock (``data-now``), which every render moves on."""
    return re.sub(r' data-now="\d+"', "", html)


async def test_timeline_shows_every_request_and_tool_call_from_the_store_and_the_same_after_a_restart(
    user: Any, make_session: Any, host: SessionHost
) -> None:
    """W8: a turn's model requests (tokens, model, time to first token) and tool calls (with
    their durations) on one axis with ticks, built from the store: a host that never saw the
    run (a restarted Studio) shows the same rows."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="what files are here? read the README", agent="build")
    await host.wait_idle(sid)
    html = await host.timeline(sid)
    found = rows(html)
    kinds = [r["kind"] for r in found]
    assert kinds[0] == "turn" and kinds.count("model") == 3 and kinds.count("tool") == 2, kinds
    assert [r["label"] for r in found if r["kind"] == "tool"] == ["ls", "read"]
    assert all(r["status"] == "ok" for r in found)
    for row in found:
        assert row["start"].isdigit() and row["end"].isdigit() and int(row["end"]) >= int(row["start"]), row
    turn = found[0]
    assert all(int(turn["start"]) <= int(r["start"]) <= int(r["end"]) <= int(turn["end"]) for r in found[1:])
    assert "Turn 1 · what files are here? read the README" in html
    assert re.search(r'class="tl-sum">in [\d,]+ · out [\d,]+', html), "model rows say their tokens"
    assert 'class="tl-tick" data-at=' in html, "the axis has ticks"
    await host.close()
    restarted = SessionHost(flush_interval=0.01)
    set_session_host(restarted)
    try:
        assert without_now(await restarted.timeline(sid)) == without_now(html)
    finally:
        await restarted.close()


def _timeline_parts(push: str) -> str:
    """The parts of a push that concern the Timeline (the test's page has only the Timeline)."""
    node = parse(push)
    keep = []
    for child in node.children:
        if isinstance(child, str):
            continue
        how = child.attr("hx-swap-oob") or ""
        target = how.split("#", 1)[1] if "#" in how else child.attr("id") or ""
        if target.startswith(("tl-", "timeline-", "tab-timeline")):
            keep.append(child.html().replace(">", f' hx-swap-oob="{how}">', 1))
    return "".join(keep)


async def test_live_pushes_patch_the_timeline_into_what_a_fresh_render_shows(
    user: Any, make_session: Any, code_host: SessionHost, studio_data_dir: Path
) -> None:
    """W8 live: while a code-mode script waits in a nested call, the page's Timeline (patched by
    the pushes only, never reloaded) shows the script running under its codemode call with the
    nested calls that settled; when the turn ends, the patched Timeline equals a fresh render,
    and a push carried only the rows that changed, not the whole Timeline."""
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    page = parse("<div>" + await code_host.timeline(sid) + "</div>")  # the page opened the Timeline
    layer = get_channel_layer()
    watcher = await layer.new_channel()
    await layer.group_add(f"session-{session.pk}", watcher)
    await code_host.prompt(sid, prompt="CODEMODE HOLD:tl1 please", agent="build")
    sizes: list[int] = []

    def live_rows() -> list[dict[str, str]]:
        return rows(page.html())

    async with asyncio.timeout(30):
        while not any(r["kind"] == "nested_call" and r["label"] == "tools.read" for r in live_rows()):
            push = (await layer.receive(watcher))["html"]
            part = _timeline_parts(push)
            if part:
                sizes.append(part.count('class="tl-row '))
                apply(page, part)
    held = live_rows()
    script = next(r for r in held if r["kind"] == "script")
    assert script["status"] == "running" and script["end"] == "", "the script is still running: its bar grows"
    assert [r["label"] for r in held if r["kind"] == "nested_call"][:2] == ["tools.ls", "tools.read"]
    assert 'data-live="1"' in page.html()
    (studio_data_dir / "release-tl1").touch()
    await code_host.wait_idle(sid)
    while True:  # every push the run made, up to the last one
        try:
            push = (await asyncio.wait_for(layer.receive(watcher), 0.5))["html"]
        except TimeoutError:
            break
        part = _timeline_parts(push)
        if part:
            sizes.append(part.count('class="tl-row '))
            apply(page, part)
    fresh = parse("<div>" + await code_host.timeline(sid) + "</div>")
    assert without_now(page.html()) == without_now(fresh.html())
    final = rows(fresh.html())
    assert all(r["status"] == "ok" for r in final), [(r["kind"], r["status"]) for r in final]
    assert max(sizes) < len(final), "pushes carried the rows that changed, never the whole Timeline"


async def test_span_details_are_read_from_the_store_and_never_show_an_api_key(
    user: Any, make_session: Any, host: SessionHost, logged_in: Client
) -> None:
    """W8/W11: a tool call's details are its arguments and result from the store, a model
    request's are the context it was sent and its ledger row; a registered model's API key that
    reached the store through a file the agent read is replaced (details, both trace downloads)."""
    from studio.models import RegisteredModel

    secret = "studio-secret-0123456789abcdef"
    await RegisteredModel.objects.acreate(name="Keyed", provider="custom", model_id="x", api_key=secret)
    session = await sync_to_async(make_session)(user)
    await asyncio.to_thread(Path(session.workdir, "README.md").write_text, f"# Sample\nThe key is {secret}.\n")
    sid = str(session.pk)
    await host.prompt(sid, prompt="what files are here? read the README", agent="build")
    await host.wait_idle(sid)
    found = rows(await host.timeline(sid))
    read = next(r for r in found if r["label"] == "read")
    details = await host.timeline_span(sid, span_id=read["span"])
    assert details is not None and "Arguments" in details and "README.md" in details
    assert "[redacted]" in details and secret not in details
    model = next(r for r in found if r["kind"] == "model")
    sent = await host.timeline_span(sid, span_id=model["span"])
    assert sent is not None and "Sent: the context" in sent and "what files are here?" in sent
    assert "Ledger row" in sent
    assert await host.timeline_span(sid, span_id="tool:nope") is None
    for name in ("trace.json", "trace.otlp.json"):
        response = await sync_to_async(logged_in.get)(f"/sessions/{sid}/download/{name}")
        assert response.status_code == 200, name
        assert secret.encode() not in response.content, name


async def test_timeline_and_download_urls_need_login_and_answer_404_for_someone_elses_session(
    user: Any, other_user: Any, make_session: Any, client: Client
) -> None:
    """W6: every new URL needs login and answers someone else's session like an unknown one."""
    session = await sync_to_async(make_session)(user)
    urls = [
        f"/sessions/{session.pk}/timeline/",
        f"/sessions/{session.pk}/timeline/span/?span=turn:x",
        f"/sessions/{session.pk}/download/trace.json",
        f"/sessions/{session.pk}/download/trace.otlp.json",
        f"/sessions/{session.pk}/download/store.sqlite",
    ]
    for url in urls:
        response = await sync_to_async(client.get)(url)
        assert response.status_code == 302 and "/login/" in response.headers["Location"], url
    await sync_to_async(client.force_login)(other_user)
    for url in urls:
        mine = await sync_to_async(client.get)(url.replace(str(session.pk), "00000000-0000-0000-0000-000000000000"))
        theirs = await sync_to_async(client.get)(url)
        assert theirs.status_code == mine.status_code == 404, url


async def test_downloads_are_the_documented_trace_json_otlp_json_and_a_consistent_store_copy(
    user: Any, make_session: Any, gated_host: Any, logged_in: Client, tmp_path: Path
) -> None:
    """W11: trace.json validates against the shipped JSON Schema, trace.otlp.json is one OTLP
    ExportTraceServiceRequest with the turn's spans, store.sqlite is an agent store holding the
    session (and no API key); while a turn writes, the store download is refused (409)."""
    import json
    import sqlite3

    import jsonschema

    from agentcore.trace.export_json import shipped_schema

    host, gate, _server = gated_host
    session = await sync_to_async(make_session)(user)
    sid = str(session.pk)
    await host.prompt(sid, prompt="what files are here?", agent="build")
    await host.wait_idle(sid)
    document = json.loads((await sync_to_async(logged_in.get)(f"/sessions/{sid}/download/trace.json")).content)
    jsonschema.validate(document, shipped_schema())
    assert document["scope"] == {"request_id": None, "conversation_id": "main"}
    assert {s["kind"] for s in document["spans"]} >= {"turn", "model", "tool"}
    otlp = json.loads((await sync_to_async(logged_in.get)(f"/sessions/{sid}/download/trace.otlp.json")).content)
    names = [s["name"] for s in otlp["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert "invoke_agent agentcore" in names and any(n.startswith("execute_tool") for n in names)
    response = await sync_to_async(logged_in.get)(f"/sessions/{sid}/download/store.sqlite")
    assert response.status_code == 200
    assert response.headers["Content-Disposition"] == f'attachment; filename="session-{sid[:8]}.sqlite"'
    copy = tmp_path / "copy.sqlite"
    copy.write_bytes(b"".join(response.streaming_content))  # type: ignore[attr-defined]
    with sqlite3.connect(copy) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        texts = " ".join(p for (p,) in conn.execute("SELECT payload FROM entries"))
    assert "what files are here?" in texts
    assert not list((Path(session.store_path).parent.parent / "exports").glob("download-*")), "the copy was removed"
    await host.prompt(sid, prompt="HOLD while downloading", agent="build")
    await gate.entered.wait()
    busy = await sync_to_async(logged_in.get)(f"/sessions/{sid}/download/store.sqlite")
    assert busy.status_code == 409 and b"writing" in busy.content
    gate.release()
    await host.wait_idle(sid)
