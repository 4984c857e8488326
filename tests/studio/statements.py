"""The SQL statements Studio runs on Django's database thread, for tests that say which reads a
step makes (every host and socket read runs there: ``database_sync_to_async``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection


class StatementLog:
    """An execute wrapper on the database thread's connection that keeps every statement."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements.append(sql)
        return execute(sql, params, many, context)

    def touching(self, text: str) -> list[str]:
        return [s for s in self.statements if text in s]


@asynccontextmanager
async def statements_on_database_thread() -> AsyncIterator[StatementLog]:
    """The statements run on Django's database thread inside the block."""
    log = StatementLog()
    await sync_to_async(lambda: connection.execute_wrappers.append(log))()
    try:
        yield log
    finally:
        await sync_to_async(lambda: connection.execute_wrappers.remove(log))()
