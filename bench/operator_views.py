"""The operator's views at scale: the Timeline of a 1,000-span turn and the sessions list of
10,000 sessions, each against a baseline measured in the same run (SPEC W8, W9).

- **Timeline**: one real run makes a store with a single turn of ``--rounds`` tool rounds
  (500 → 1,002 spans: the turn, 501 model requests, 500 tool calls), as ``bench/trace_build.py``
  does. Measured: ``build`` — agentcore's ``build_trace`` of the turn (the baseline: read and
  fold the store); ``region`` — what a page gets when it opens the Timeline: the host's feed
  refreshed, the conversation laid out (``studio.timeline.lay_out``) and rendered as HTML
  (``studio.timeline_html.region_html``), from a feed already built (the host keeps it);
  ``cold`` — the same from nothing (a new feed reads and folds the whole store first); ``patch``
  — a live push after one more commit (refresh, lay out, diff, render the changed rows).
- **Sessions list**: a Studio database (SQLite, a temp dir) with ``--sessions`` sessions of one
  person, 3 prompts each, and the list page rendered through Django's test client: the default
  page (newest 50 by activity), a search in the prompts, a status filter, sort by tokens and by
  cost, and the last page; the baseline is the same page for a person with 10 sessions.

Each is the best and the median of ``--repeat`` runs (the machine is shared: the best is what
the work costs). Usage: ``python bench/operator_views.py [--rounds 500] [--sessions 10000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing it
    sys.path.insert(0, str(ROOT))

from bench.trace_build import timings_ms  # noqa: E402


def timeline_bench(rounds: int, repeat: int) -> list[tuple[str, tuple[float, float]]]:
    from agentcore.trace import Redactor, build_trace
    from bench.trace_build import append_one, make_store
    from studio import timeline, timeline_html
    from studio.timeline_store import TimelineFeed

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        asyncio.run(make_store(path, rounds))
        redactor = Redactor()
        feed = TimelineFeed(str(path), redactor)
        feed.refresh()

        def region() -> str:
            feed.refresh()
            return timeline_html.region_html(feed.lay_out("main"), "00000000-0000-0000-0000-000000000000")

        def cold() -> str:
            fresh = TimelineFeed(str(path), redactor)
            fresh.refresh()
            return timeline_html.region_html(fresh.lay_out("main"), "00000000-0000-0000-0000-000000000000")

        html = region()
        rows = html.count('class="tl-row ')
        out.append(
            (f"build_trace (baseline, {rows} rows)", timings_ms(lambda: build_trace(path, request_id="bench"), repeat))
        )
        out.append(("Timeline region, host feed", timings_ms(region, repeat)))
        out.append(("Timeline region, cold", timings_ms(cold, repeat)))
        picture = timeline.Picture.of(feed.lay_out("main"), feed.touched_seq)
        asyncio.run(append_one(path))

        def patch() -> str:  # the first repeat reads the new commit; every one lays out and diffs
            feed.refresh()
            laid_out = feed.lay_out("main")
            diff = timeline.diff(picture, laid_out)
            return timeline_html.patch_html(diff, laid_out, "x") if diff else ""

        out.append(("live patch after a commit", timings_ms(patch, repeat)))
    return out


def list_bench(sessions: int, repeat: int) -> list[tuple[str, tuple[float, float]]]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    data = tempfile.mkdtemp(prefix="bench-list-")
    os.environ["STUDIO_DATA_DIR"] = data
    os.environ["STUDIO_DATABASE_PATH"] = str(Path(data) / "studio.sqlite3")
    os.environ["DJANGO_ALLOWED_HOSTS"] = "testserver"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from studio.management.commands.studio import ensure_demo_model
    from studio.models import RegisteredModel, Run, StudioSession

    call_command("migrate", verbosity=0)
    ensure_demo_model()
    model = RegisteredModel.objects.get(provider="demo")
    users = get_user_model()
    big = users.objects.create_user(username="big", password="x" * 12)
    small = users.objects.create_user(username="small", password="x" * 12)

    def make(owner: Any, count: int) -> None:
        rows = [
            StudioSession(
                owner=owner,
                registered_model=model,
                title=f"Session {n}",
                workdir="/w",
                store_path=f"/s/{n}",
                status=("idle", "running", "waiting", "failed")[n % 4],
                input_tokens=n * 7 % 5000,
                cost=n % 97,
            )
            for n in range(count)
        ]
        made = StudioSession.objects.bulk_create(rows, batch_size=1000)
        runs = [
            Run(session=s, request_id=f"r{k}", prompt=f"prompt {k} about topic {n % 500} of {s.title}")
            for n, s in enumerate(made)
            for k in range(3)
        ]
        Run.objects.bulk_create(runs, batch_size=2000)

    make(big, sessions)
    make(small, 10)
    out = []
    for who, user in (("10 sessions (baseline)", small), (f"{sessions:,} sessions", big)):
        client = Client()
        client.force_login(user)
        for name, query in (
            ("newest 50", ""),
            ("search prompts", "?q=topic+42+of"),
            ("status filter", "?status=waiting"),
            ("sort by tokens", "?sort=tokens"),
            ("sort by cost", "?sort=cost"),
            ("last page", "?page=9999"),
        ):
            assert client.get("/" + query).status_code == 200
            out.append((f"{who}: {name}", timings_ms(lambda q=query, c=client: c.get("/" + q), repeat)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    results = list_bench(args.sessions, args.repeat) + timeline_bench(args.rounds, args.repeat)
    print(f"{'':46}{'best ms':>9}{'median ms':>11}")
    for name, (best, median) in results:
        print(f"{name:46}{best:9.1f}{median:11.1f}")


if __name__ == "__main__":
    main()
