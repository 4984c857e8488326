"""agentcore: a durable LLM agent runtime.

``await create_agent(...)`` returns an ``AgentRuntime`` that owns the whole tool loop; feed it
``AgentInput``s and consume the typed events of ``run()``. Everything here is re-exported
from submodules; nothing else is public API.

The names are resolved on first use (PEP 562), so ``import agentcore`` — done by every tool
that only needs, say, ``agentcore.models`` or the CLI's ``--help`` — costs almost nothing,
and a program pays only for the parts it touches. The test doubles (``agentcore.testing``)
and the offline demo's fake server are never loaded unless a test or the demo uses them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentcore.compaction.transcript import compact_agent_messages
    from agentcore.context.estimate import estimate_agent_context_tokens
    from agentcore.errors import AgentError, ExecutionAborted, InputValidationError, ToolError, UserInputRequired
    from agentcore.events import AgentEvent, RunEndEvent
    from agentcore.extensions.tasks import (
        AgentRegistry,
        agent_hook,
        create_agent_registry,
        define_agent_doc,
        define_agent_extension,
        define_agent_task,
        define_task_tool,
    )
    from agentcore.harness.backup import export_agent_database, import_agent_database
    from agentcore.harness.postgres_store import postgres_storage
    from agentcore.harness.storage import AgentStorage, StorageFactory
    from agentcore.host import AgentHost
    from agentcore.inputs import AgentInput, AskResume, ImageInput, PlanResume, ToolApprovalResume
    from agentcore.models.attributes import ModelAttributes, parse_model_attributes
    from agentcore.offline import cancel_agent_conversation
    from agentcore.providers.connection_lanes import new_host_http_client
    from agentcore.runtime import AgentRuntime, create_agent
    from agentcore.sync import run_sync
    from agentcore.tools.base import AgentTool, ToolContext, ToolDefinition, ToolResult
    from agentcore.trace import TraceBuilder, build_trace, otlp_document, span_details, trace_document

_EXPORTS: dict[str, str] = {
    "AgentError": "agentcore.errors",
    "AgentEvent": "agentcore.events",
    "AgentHost": "agentcore.host",
    "AgentInput": "agentcore.inputs",
    "AgentRegistry": "agentcore.extensions.tasks",
    "AgentRuntime": "agentcore.runtime",
    "AgentStorage": "agentcore.harness.storage",
    "AgentTool": "agentcore.tools.base",
    "AskResume": "agentcore.inputs",
    "ExecutionAborted": "agentcore.errors",
    "ImageInput": "agentcore.inputs",
    "InputValidationError": "agentcore.errors",
    "ModelAttributes": "agentcore.models.attributes",
    "PlanResume": "agentcore.inputs",
    "RunEndEvent": "agentcore.events",
    "StorageFactory": "agentcore.harness.storage",
    "ToolApprovalResume": "agentcore.inputs",
    "ToolContext": "agentcore.tools.base",
    "ToolDefinition": "agentcore.tools.base",
    "ToolError": "agentcore.errors",
    "ToolResult": "agentcore.tools.base",
    "TraceBuilder": "agentcore.trace",
    "UserInputRequired": "agentcore.errors",
    "agent_hook": "agentcore.extensions.tasks",
    "build_trace": "agentcore.trace",
    "cancel_agent_conversation": "agentcore.offline",
    "compact_agent_messages": "agentcore.compaction.transcript",
    "create_agent": "agentcore.runtime",
    "create_agent_registry": "agentcore.extensions.tasks",
    "define_agent_doc": "agentcore.extensions.tasks",
    "define_agent_extension": "agentcore.extensions.tasks",
    "define_agent_task": "agentcore.extensions.tasks",
    "define_task_tool": "agentcore.extensions.tasks",
    "estimate_agent_context_tokens": "agentcore.context.estimate",
    "export_agent_database": "agentcore.harness.backup",
    "import_agent_database": "agentcore.harness.backup",
    "new_host_http_client": "agentcore.providers.connection_lanes",
    "parse_model_attributes": "agentcore.models.attributes",
    "otlp_document": "agentcore.trace",
    "postgres_storage": "agentcore.harness.postgres_store",  # needs the postgres extra (psycopg)
    "run_sync": "agentcore.sync",
    "span_details": "agentcore.trace",
    "trace_document": "agentcore.trace",
}

__all__ = [
    "AgentError",
    "AgentEvent",
    "AgentHost",
    "AgentInput",
    "AgentRegistry",
    "AgentRuntime",
    "AgentStorage",
    "AgentTool",
    "AskResume",
    "ExecutionAborted",
    "ImageInput",
    "InputValidationError",
    "ModelAttributes",
    "PlanResume",
    "RunEndEvent",
    "StorageFactory",
    "ToolApprovalResume",
    "ToolContext",
    "ToolDefinition",
    "ToolError",
    "ToolResult",
    "TraceBuilder",
    "UserInputRequired",
    "agent_hook",
    "build_trace",
    "cancel_agent_conversation",
    "compact_agent_messages",
    "create_agent",
    "create_agent_registry",
    "define_agent_doc",
    "define_agent_extension",
    "define_agent_task",
    "define_task_tool",
    "estimate_agent_context_tokens",
    "export_agent_database",
    "import_agent_database",
    "new_host_http_client",
    "otlp_document",
    "parse_model_attributes",
    "postgres_storage",
    "run_sync",
    "span_details",
    "trace_document",
]


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` and cache the value as a module attribute."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentcore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
