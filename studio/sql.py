"""Plain SQL for the few reads every live turn makes, built from the models' own metadata.

Why not the ORM there: on this project's machines building a query costs far more CPU than
running it — a filtered, ordered ``values()`` read measured ~0.3–0.8 ms to compile and convert
against ~0.03 ms for the same statement run directly — and a turn's end re-read the Usage tab
and the turns' notices for every watched page. So those statements are written once here, in
SQL both of Studio's databases speak (SQLite and PostgreSQL), with table and column names and
parameters taken from the models (``Model._meta``, ``Field.get_db_prep_value``) and every value
read back through the same converters the ORM applies — so a row reads the same either way.
Everything else keeps the ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Field, Model


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[Model], name: str) -> str:
    return connection.ops.quote_name(_field(model, name).column)


def param(model: type[Model], name: str, value: Any) -> Any:
    """``value`` as the database takes it for ``model.name`` (a UUID as SQLite's hex, …)."""
    return _field(model, name).get_db_prep_value(value, connection)


def fetch(sql: str, params: Sequence[Any], fields: Sequence[tuple[type[Model], str]]) -> list[tuple[Any, ...]]:
    """Run ``sql`` and read each row's columns as the ORM reads ``fields`` (model, field name)."""
    converters = [_converters(_field(model, name)) for model, name in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, list(params))
        rows = cursor.fetchall()
    out = []
    for row in rows:
        values = []
        for value, (field, functions) in zip(row, converters, strict=True):
            for convert in functions:
                value = convert(value, field, connection)
            values.append(value)
        out.append(tuple(values))
    return out


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return field


def _converters(field: Field[Any, Any]) -> tuple[Any, list[Any]]:
    col = field.get_col(field.model._meta.db_table)
    return col, [*connection.ops.get_db_converters(col), *field.get_db_converters(connection)]
