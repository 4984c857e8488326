"""The contexts of a session: the main conversation, its forks and subagent children (SPEC S1–S3, S5).

Each context is a conversation of the same store, addressed by commands through a numeric
``target_id`` (0 is the main conversation). A context other than main is described by the
register ``conv:<conversation_id>``; the next free target id lives in ``session:targets``.
Both are written in the same transaction that creates the context, so a crash never leaves a
half-made fork or child.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentcore.errors import InputValidationError
from agentcore.harness.projection import StoreView, conversation_key
from agentcore.harness.storage import RegisterWrite

TARGETS_KEY = "session:targets"
MAIN_TARGET = 0
ContextKind = Literal["main", "fork", "subagent"]


@dataclass(slots=True, frozen=True)
class Context:
    target_id: int
    conversation_id: str
    kind: ContextKind
    parent_target_id: int | None = None
    base: dict[str, str] | None = None  # {"conversation", "entry"} a fork starts from
    deleted: bool = False
    background: bool = False  # a subagent started in the background
    tools: tuple[str, ...] | None = None  # a subagent's tools (parent ∩ whitelist)
    label: str = ""
    created_ms: int = 0
    owner_call: str | None = None  # the parent's tool call that made a subagent

    @property
    def is_main(self) -> bool:
        return self.kind == "main"


class Contexts:
    """Reads contexts from the view and prepares the writes that create or change them."""

    def __init__(self, view: StoreView, main_conversation: str) -> None:
        self.view = view
        self.main_conversation = main_conversation

    @property
    def main(self) -> Context:
        return Context(MAIN_TARGET, self.main_conversation, "main", label="main")

    def all(self, *, include_deleted: bool = False) -> list[Context]:
        found = [self.main]
        for key, register in self.view.registers.items():
            if key.startswith("conv:"):
                context = _context(key[len("conv:") :], register.value)
                if include_deleted or not context.deleted:
                    found.append(context)
        return sorted(found, key=lambda c: c.target_id)

    def by_target(self, target_id: int | None) -> Context:
        if target_id is None or target_id == MAIN_TARGET:
            return self.main
        for context in self.all(include_deleted=True):
            if context.target_id == target_id:
                if context.deleted:
                    raise InputValidationError(f"target_id {target_id} was deleted", field="target_id")
                return context
        raise InputValidationError(f"no context with target_id {target_id}", field="target_id")

    def by_conversation(self, conversation_id: str) -> Context:
        if conversation_id == self.main_conversation:
            return self.main
        value = self.view.register(conversation_key(conversation_id))
        if value is None:
            raise InputValidationError(f"unknown conversation {conversation_id!r}", field="target_id")
        return _context(conversation_id, value)

    def children(self, target_id: int) -> list[Context]:
        """Subagents owned by ``target_id``, transitively (forks are independent)."""
        out: list[Context] = []
        frontier = [target_id]
        contexts = self.all(include_deleted=True)
        while frontier:
            parent = frontier.pop()
            for context in contexts:
                if context.kind == "subagent" and context.parent_target_id == parent:
                    out.append(context)
                    frontier.append(context.target_id)
        return out

    def create(
        self,
        conversation_id: str,
        kind: ContextKind,
        *,
        parent: Context,
        base: dict[str, str] | None = None,
        **extra: Any,
    ) -> tuple[Context, list[RegisterWrite]]:
        """A new context and the register writes that create it (commit them together)."""
        counter = self.view.register(TARGETS_KEY) or {"next": 1}
        target_id = int(counter["next"])
        value: dict[str, Any] = {
            "target_id": target_id,
            "kind": kind,
            "parent_target_id": parent.target_id,
            "base": base,
            "deleted": False,
            "created_ms": self.view.clock(),
            **extra,
        }
        writes = [
            RegisterWrite(TARGETS_KEY, {"next": target_id + 1}, expected_seq=self.view.register_seq(TARGETS_KEY)),
            RegisterWrite(conversation_key(conversation_id), value, expected_seq=0),
        ]
        return _context(conversation_id, value), writes

    def mark_deleted(self, context: Context) -> RegisterWrite:
        key = conversation_key(context.conversation_id)
        value = dict(self.view.register(key) or {}, deleted=True)
        return RegisterWrite(key, value, expected_seq=self.view.register_seq(key))


def _context(conversation_id: str, value: dict[str, Any]) -> Context:
    tools = value.get("tools")
    return Context(
        target_id=int(value["target_id"]),
        conversation_id=conversation_id,
        kind=value["kind"],
        parent_target_id=value.get("parent_target_id"),
        base=value.get("base"),
        deleted=bool(value.get("deleted")),
        background=bool(value.get("background")),
        tools=tuple(tools) if tools is not None else None,
        label=str(value.get("label") or ""),
        created_ms=int(value.get("created_ms") or 0),
        owner_call=value.get("owner_call"),
    )
