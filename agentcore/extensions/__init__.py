"""Optional integrations that turn outside services into agentcore tools (SPEC T4, X3).

Each integration lives in its own submodule and may need an optional dependency, so nothing
here is imported eagerly: ``import agentcore`` must keep working without the ``mcp`` extra.
Import what you need from the submodule, e.g. ``from agentcore.extensions.mcp import
connect_mcp_server, create_mcp_tools``.
"""
