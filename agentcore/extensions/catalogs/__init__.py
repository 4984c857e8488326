"""Tool catalogs and the ``tool_search`` tool (SPEC X3).

``AgentToolCatalog`` / ``CatalogToolDescriptor`` / ``CatalogConnection`` describe a catalog
(``catalog``); ``session={"tool_search": {"catalogs": [...]}}`` turns them into the
``tool_search`` tool and lazily connected catalog tools (``tool_search``). For MCP servers use
``agentcore.extensions.mcp_catalog.create_mcp_tool_catalog``.
"""

from agentcore.extensions.catalogs.catalog import (
    AgentToolCatalog,
    CatalogConnection,
    CatalogToolDescriptor,
    StaticCatalogConnection,
)

__all__ = ["AgentToolCatalog", "CatalogConnection", "CatalogToolDescriptor", "StaticCatalogConnection"]
