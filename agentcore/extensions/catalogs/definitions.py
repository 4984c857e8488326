"""Saved tool definitions and the drift check (SPEC X3). Pure functions, no I/O.

A *definition* is the JSON a session saves the first time it sees a catalog tool — declared by
the host or discovered from the service — and compares before every call:
``{name, description, parameters, output_schema, replay, read_only}``. ``read_only`` is
compared too, because it decides whether calls may run concurrently.

Registers (durable, one owner writes them):

- ``catalog:<catalog_id>`` = ``{"kind", "source": "declared" | "discovered", "tools": {id:
  definition}, "missing": [ids]}`` — written once per tool id, never overwritten: a new
  definition needs a new session.
- ``catalog-offered:<conversation_id>`` = ``{"tools": [ids]}`` — the catalog tools a context's
  model has found through ``tool_search`` and is offered from then on (a reopened session
  still offers them).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from agentcore.tools.base import AgentTool
from agentcore.tools.display import clean_value

FIELDS: Final = ("name", "description", "parameters", "output_schema", "replay", "read_only")
# Bounds on what one definition may put in the store and in every request that offers it.
LIMITS: Final = {"description": 16 * 1024, "parameters": 48 * 1024, "output_schema": 48 * 1024}


def catalog_key(catalog_id: str) -> str:
    return f"catalog:{catalog_id}"


def offered_key(conversation_id: str) -> str:
    return f"catalog-offered:{conversation_id}"


class NotJson(ValueError):
    """A live tool's definition cannot be saved or compared (NaN, bytes, objects)."""


def live_definition(tool: AgentTool) -> dict[str, Any]:
    """The definition of a live tool, in the form the store keeps (valid UTF-8, plain JSON)."""
    raw = {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "output_schema": tool.output_schema,
        "replay": tool.replay,
        "read_only": bool(tool.read_only),
    }
    try:
        value: dict[str, Any] = json.loads(json.dumps(clean_value(raw), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise NotJson(f"the definition of {tool.name!r} is not plain JSON: {exc}") from None
    return value


def oversized(definition: dict[str, Any]) -> str | None:
    """The first field of ``definition`` over its size limit (characters of its JSON), or None."""
    for name, limit in LIMITS.items():
        value = definition.get(name)
        size = len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False))
        if size > limit:
            return name
    return None


def differences(saved: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The fields in which ``other`` differs from ``saved`` (deep equality, key order ignored)."""
    return [name for name in FIELDS if saved.get(name) != other.get(name)]


def describe_drift(tool_id: str, fields: list[str], against: str) -> str:
    changed = ", ".join("schema" if f == "parameters" else f.replace("_", " ") for f in fields)
    return f"tool '{tool_id}' differs from the definition this session saved ({changed} changed in {against})"


def search_text(definition: dict[str, Any]) -> str:
    """What ``tool_search`` matches a query against: the id (with ``_``/``-`` as spaces), the
    description and the parameter names."""
    name = str(definition.get("name", ""))
    params = definition.get("parameters") or {}
    props = params.get("properties") if isinstance(params, dict) else None
    names = " ".join(props) if isinstance(props, dict) else ""
    spaced = name.replace("_", " ").replace("-", " ")
    return f"{name} {spaced} {definition.get('description', '')} {names}".lower()


def query_terms(query: str) -> list[str]:
    """The words of a query (lower case); one-letter words only when there is nothing else."""
    words = re.findall(r"\w+", query.lower())
    longer = [word for word in words if len(word) > 1]
    return list(dict.fromkeys(longer or words))


def rank(query: str, candidates: list[tuple[str, dict[str, Any]]], limit: int) -> list[tuple[str, dict[str, Any]]]:
    """The best ``limit`` of ``(catalog_id, definition)`` for ``query``: one point per query
    word found in the tool's search text, three more for the exact tool id; ties keep the
    catalogs' order. Tools matching no word are left out."""
    terms = query_terms(query)
    exact = query.strip().lower()
    scored: list[tuple[int, int, tuple[str, dict[str, Any]]]] = []
    for position, (catalog_id, definition) in enumerate(candidates):
        text = search_text(definition)
        score = sum(1 for term in terms if term in text)
        if exact and exact == str(definition.get("name", "")).lower():
            score += 3
        if score:
            scored.append((-score, position, (catalog_id, definition)))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [match for _, _, match in scored[:limit]]
