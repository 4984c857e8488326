"""``python -m agentcore run --prompt ...``: stream one run to the terminal (SPEC R5).

Answer text goes to stdout; tool calls, retries and the usage summary go to stderr so the
answer can be piped. With no model flags the offline demo model is used. Exit codes:
0 completed, 1 failed, 2 invalid input, 3 paused for user input, 130 aborted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any, TextIO

from agentcore.errors import AgentError, InputValidationError
from agentcore.events import (
    AgentEvent,
    PlanEvent,
    RetryEvent,
    RunEndEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolEvent,
)
from agentcore.host import AgentHost
from agentcore.inputs import AgentInput, AskResume
from agentcore.runtime import AgentRuntime, create_agent
from agentcore.trace.command import add_trace_parser, trace_command

DATABASE_URL_ENV = "AGENTCORE_DATABASE_URL"
EXIT_CODES = {"completed": 0, "failed": 1, "paused": 3, "aborted": 130}


def _web_search(value: str) -> bool | None:
    lowered = value.strip().lower()
    if lowered == "":
        return None
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError('--web-search takes "", true or false')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agentcore", description="agentcore: a durable agent runtime")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one prompt and stream the answer")
    run.add_argument("--prompt", default="", help="the prompt (omit when resuming with --answer)")
    run.add_argument("--request-id", help="logical id; re-run with the same id to resume or replay")
    run.add_argument("--provider", help="anthropic | openai | demo | a custom name (needs --base-url)")
    run.add_argument("--model")
    run.add_argument("--base-url")
    run.add_argument("--api-kind", choices=["openai-responses", "anthropic-messages", "openai-completions"])
    run.add_argument("--effort", help="off|minimal|low|medium|high|xhigh|max|ultra, or '' to let the model decide")
    run.add_argument("--model-attributes", help="JSON object of model attributes (validated strictly)")
    run.add_argument("--web-search", type=_web_search, default=None, help='"" (auto), true or false')
    store = run.add_mutually_exclusive_group()
    store.add_argument("--database", help="SQLite store file: makes the run durable and resumable")
    store.add_argument(
        "--database-url",
        help=f"PostgreSQL store instead (postgresql://user@host/db?store=NAME); {DATABASE_URL_ENV} "
        "sets it without putting a password on the command line",
    )
    run.add_argument("--workdir")
    run.add_argument("--permission-policy", choices=["read-only", "workspace", "auto"])
    run.add_argument("--plan", action="store_true", help="plan mode: investigate and propose a plan")
    run.add_argument(
        "--follow-up",
        action="append",
        default=[],
        metavar="TEXT",
        help="queue another prompt, answered after this one in the same run (repeat; session protocol)",
    )
    run.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="ID=VALUE",
        help="answer a paused ask_user question (repeat; use with the paused --request-id and --database)",
    )
    add_trace_parser(sub)
    return parser


def _options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if args.provider is None and args.model is None and args.base_url is None:
        options["provider"] = "demo"
    for name in ("provider", "model", "base_url", "api_kind", "effort", "workdir", "model_attributes"):
        value = getattr(args, name)
        if value is not None:
            options[name] = value
    if args.web_search is not None:
        options["web_search"] = args.web_search
    if args.database:
        options["database_path"] = args.database
    elif url := _database_url(args):
        options["database_url"] = url
    if args.permission_policy:
        options["permission_policy"] = args.permission_policy
    return options


class TerminalPrinter:
    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out, self.err = out, err
        self.final: RunEndEvent | None = None
        self.ends: list[RunEndEvent] = []

    def __call__(self, event: AgentEvent) -> None:
        if isinstance(event, TextDeltaEvent):
            self.out.write(event.delta)
            self.out.flush()
        elif isinstance(event, ThinkingDeltaEvent):
            self.err.write(event.delta)
        elif isinstance(event, ToolEvent) and event.phase == "start":
            self.err.write(f"\n⚙ {event.name} {_brief(event.arguments)}\n")
        elif isinstance(event, ToolEvent) and event.phase == "end":
            mark = "✗" if event.is_error else "✓"
            first = (event.result or "").strip().splitlines()[:1]
            self.err.write(f"  {mark} {event.name}: {first[0][:100] if first else ''}\n")
        elif isinstance(event, RetryEvent):
            self.err.write(f"\n↻ retry {event.attempt}/{event.max_attempts} ({event.kind}): {event.reason}\n")
        elif isinstance(event, PlanEvent) and event.phase == "end":
            self.err.write(f"\n— plan {event.approval_id} —\n")
        elif isinstance(event, RunEndEvent):
            self.final = event
            self.ends.append(event)
            if event.replayed:  # answered from the store: show the stored answer
                self.out.write(event.text)
            self.out.write("\n")
            u = event.usage
            self.err.write(
                f"[{event.status}] tokens: in {u.get('input_tokens', 0)} (+{u.get('cached_input_tokens', 0)} cached)"
                f", out {u.get('output_tokens', 0)}, calls {u.get('calls', 0)}, cost ${u.get('cost', 0.0):.4f}\n"
            )
            if event.error:
                self.err.write(f"error ({event.error_code}): {event.error}\n")
            if event.pending:
                self.err.write(
                    f"waiting for input: {event.pending.get('kind')} — resume with --request-id {event.request_id}\n"
                )
                for question in event.pending.get("questions", []):
                    options = f" [{' / '.join(question['options'])}]" if question.get("options") else ""
                    self.err.write(f"  --answer {question['id']}=…  {question['question']}{options}\n")


def _answers(pairs: list[str]) -> dict[str, list[str] | str]:
    answers: dict[str, list[str] | str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InputValidationError(f"--answer {pair!r} must look like ID=VALUE", field="answer")
        values = [v.strip() for v in value.split(",")] if "," in value else value
        answers[key.strip()] = values
    return answers


def _brief(arguments: dict[str, Any] | None) -> str:
    if not arguments:
        return ""
    key = next(iter(arguments))
    return f"{key}={str(arguments[key])[:60]!r}"


def _database_url(args: argparse.Namespace) -> str | None:
    return args.database_url or os.environ.get(DATABASE_URL_ENV) or None


def _check_answerable(args: argparse.Namespace, options: dict[str, Any]) -> None:
    """``--answer`` resumes a paused request in an existing store: refuse before opening anything
    (opening a missing ``--database`` would create an empty store; a PostgreSQL store is opened
    without creating one, so a missing store is refused too)."""
    if not args.request_id:
        raise InputValidationError("--answer needs the --request-id of the paused request", field="request_id")
    if "database_url" in options:
        from agentcore.harness.postgres_store import PostgresStorageFactory  # psycopg only when used

        url = options.pop("database_url")
        options["storage"] = PostgresStorageFactory.from_url(url, option="database_url", create=False)
        return
    if not args.database or not Path(args.database).exists():
        where = f"--database {args.database!r} does not exist" if args.database else "no --database was given"
        raise InputValidationError(f"no paused request {args.request_id}: {where}", field="request_id")


def _input(args: argparse.Namespace, answers: dict[str, list[str] | str] | None, runtime: AgentRuntime) -> AgentInput:
    """A new prompt, or answers for the request the store holds paused (and no other: answers
    for an unknown id would otherwise start a new run with an empty prompt)."""
    if answers is None:
        return AgentInput(prompt=args.prompt, request_id=args.request_id, agent="plan" if args.plan else None)
    if runtime.pending_request_id != args.request_id:
        where = args.database or "the --database-url store"
        raise InputValidationError(f"no paused request {args.request_id} in {where}", field="request_id")
    return AgentInput(request_id=args.request_id, ask_resume=AskResume(answers=answers))


async def run_command(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    printer = TerminalPrinter(out, err)
    abort = asyncio.Event()
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, abort.set)
    except (NotImplementedError, RuntimeError):  # pragma: no cover - non-main thread
        pass
    options = _options(args)
    answers = _answers(args.answer) if args.answer else None
    if answers is not None:
        _check_answerable(args, options)
    if args.follow_up:
        if answers is not None:
            raise InputValidationError("--follow-up cannot be combined with --answer", field="follow_up")
        options["session"] = {}
    runtime = await create_agent(**options)
    if options.get("provider") == "demo":
        err.write("(offline demo model — no API key needed; pass --provider/--model for a real one)\n")
    try:
        input = _input(args, answers, runtime)
        if args.follow_up and input.request_id is None:
            input = input.model_copy(update={"request_id": uuid.uuid4().hex})
        queued = not args.follow_up
        async for event in runtime.run(input, AgentHost(abort_signal=abort)):
            printer(event)
            if not queued and event.type == "session":
                queued = True
                for number, text in enumerate(args.follow_up, start=1):
                    # Ids derived from the run's: re-running the same --request-id queues nothing twice.
                    command = {"type": "submit", "request_id": f"{input.request_id}.follow-up.{number}"}
                    await runtime.control({**command, "prompt": text, "mode": "follow_up"})
    finally:
        await runtime.close()
    return _exit_code(printer.ends)


def _exit_code(ends: list[RunEndEvent]) -> int:
    """The most serious outcome among the run's turns decides the exit code."""
    statuses = {end.status for end in ends}
    for status in ("failed", "aborted", "paused"):
        if status in statuses:
            return EXIT_CODES[status]
    return 0 if ends else 1


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "trace":
            return trace_command(args, sys.stdout)
        return asyncio.run(run_command(args, sys.stdout, sys.stderr))
    except AgentError as exc:
        sys.stderr.write(f"error: {exc.code}: {exc.message}\n")
        return 2 if exc.code == "input_validation" else 1
    except KeyboardInterrupt:  # pragma: no cover
        return 130
