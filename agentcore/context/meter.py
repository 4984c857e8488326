"""The live context meter of one conversation (SPEC C1, C2).

Wraps a ``ContextTracker`` with what only a running conversation knows: which response last
calibrated it, whether a compaction happened since, the reply still streaming and the window
of the model in use. The runtime keeps one for its main conversation; the session protocol
keeps one per context (forks, subagents), so each reports its own ``context_usage``.
"""

from __future__ import annotations

from collections.abc import Callable

from agentcore.context.estimate import ContextTracker
from agentcore.harness.projection import ConversationLog
from agentcore.messages import AssistantMessage, Message
from agentcore.tools.base import AgentTool


class ContextMeter:
    """``{used, total}`` of one conversation, including a reply still streaming."""

    def __init__(self, log: ConversationLog, window_guess: Callable[[], int | None]) -> None:
        self.log = log
        self._window_guess = window_guess
        self._tracker = ContextTracker()
        self._calibrated_on: Message | None = None
        self._seen_generation = 0
        self._streaming_tokens = 0
        self._static_for: object = None
        self.window: int | None = None

    def set_static(self, key: object, system_prompt: str, tools: list[AgentTool], window: int) -> None:
        """The system prompt and tools of the configuration in use (counted until calibrated)."""
        self.window = window
        if self._static_for is not key:
            self._static_for = key
            self._tracker.set_static_context(system_prompt=system_prompt, tools=tools)

    def usage(self) -> dict[str, int] | None:
        window = self.window or self._window_guess()
        if window is None:
            return None
        messages = self.log.messages
        if self.log.compaction_generation != self._seen_generation:  # C2: old responses stop calibrating
            self._seen_generation = self.log.compaction_generation
            self._tracker.after_compaction(messages)
            self._calibrated_on = None
            for message in messages:  # the retained responses may not calibrate again
                if isinstance(message, AssistantMessage):
                    self._calibrated_on = message
        for index in range(len(messages) - 1, max(-1, len(messages) - 4), -1):
            message = messages[index]
            if isinstance(message, AssistantMessage) and message.usage is not None:
                if message is not self._calibrated_on:  # a newer response recalibrates (C2)
                    self._calibrated_on = message
                    self._tracker.record_usage(index, message.usage, message)
                break
        used = self._tracker.current(messages) + self._streaming_tokens
        return {"used": used, "total": window}

    def measure(self, messages: list[Message], streaming_chars: int) -> tuple[int, int] | None:
        """The engine's meter callback: the usage with ``streaming_chars`` of a reply in flight."""
        self._streaming_tokens = streaming_chars // 4  # rough: ~4 characters per token while streaming
        usage = self.usage()
        return (usage["used"], usage["total"]) if usage else None

    def stop_streaming(self) -> None:
        self._streaming_tokens = 0

    def set_measurement(self, used: float, total: float) -> None:
        """Adopt an external measurement; later estimates grow from it (C2)."""
        self._tracker.set_measurement(used, total, message_count=len(self.log.messages))
        self.window = int(total)

    def reset(self) -> None:
        self._tracker.reset()
