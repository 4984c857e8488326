"""agentcore: a durable LLM agent runtime.

``await create_agent(...)`` returns an ``AgentRuntime`` that owns the whole tool loop; feed it
``AgentInput``s and consume the typed events of ``run()``. Everything here is re-exported
from submodules; nothing else is public API.
"""

from agentcore.compact import compact_agent_messages
from agentcore.context.estimate import estimate_agent_context_tokens
from agentcore.errors import AgentError, ExecutionAborted, InputValidationError, ToolError, UserInputRequired
from agentcore.events import AgentEvent, RunEndEvent
from agentcore.harness.backup import export_agent_database, import_agent_database
from agentcore.harness.storage import AgentStorage, StorageFactory
from agentcore.host import AgentHost
from agentcore.inputs import AgentInput, AskResume, ImageInput, PlanResume, ToolApprovalResume
from agentcore.models.attributes import ModelAttributes, parse_model_attributes
from agentcore.offline import cancel_agent_conversation
from agentcore.runtime import AgentRuntime, create_agent
from agentcore.sync import run_sync
from agentcore.tools.base import AgentTool, ToolContext, ToolDefinition, ToolResult

__all__ = [
    "AgentError",
    "AgentEvent",
    "AgentHost",
    "AgentInput",
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
    "UserInputRequired",
    "cancel_agent_conversation",
    "compact_agent_messages",
    "create_agent",
    "estimate_agent_context_tokens",
    "export_agent_database",
    "import_agent_database",
    "parse_model_attributes",
    "run_sync",
]
