"""Plain SQL for the few reads every live turn makes, built from the models' own metadata.

Why not the ORM there: on this project's machines building a query costs far more CPU than
running it — a filtered, ordered ``values()`` read measured ~0.3–0.8 ms to compile and convert
against ~0.03 ms for the same statement run directly — and a turn's end re-read the Usage tab
and the turns' notices for every watched page, and wrote a turn's rows (its run, its usage record,
the session row's status, activity, title and totals) through ``create`` and ``update``. So
those statements are written once here, in
SQL both of Studio's databases speak (SQLite and PostgreSQL), with table and column names and
parameters taken from the models (``Model._meta``, ``Field.get_db_prep_value``) and every value
read back through the same converters the ORM applies — so a row reads the same either way.
Everything else keeps the ORM.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import DecimalField, Field, Model
from django.utils import timezone

#: The database alias of the rows read here (instances are made as the ORM makes them there).
ALIAS = DEFAULT_DB_ALIAS  # ``connection`` is that alias's


def table(model: type[Model]) -> str:
    """A model's table, quoted. Its metadata is fixed, so it is looked up once: a lookup of
    ``connection`` per call cost more than the statements that use it."""
    return _table(cast(Any, model))  # a model class hashes (the stubs say not)


def column(model: type[Model], name: str) -> str:
    """A field's column, quoted (looked up once, as ``table``)."""
    return _column(cast(Any, model), name)


@functools.cache
def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@functools.cache
def _column(model: type[Model], name: str) -> str:
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
    return [tuple(_converted(row, converters)) for row in rows]


def one(model: type[Model], related: Sequence[str] = (), **where: Any) -> Any:
    """The ``model`` row whose fields equal ``where`` (field name → value), or None, with the
    rows its foreign keys point to already loaded, as ``select_related(*related)`` loads them
    (a path such as ``"root__owner"`` loads ``root`` too; a null key loads None) — one plain
    statement, built once per shape (``_joined``). Values that cannot be a field's (a malformed
    UUID) raise as the ORM's ``get`` does (``ValidationError``)."""
    shape = _joined(cast(Any, model), tuple(related), tuple(where))  # a model class hashes (the stubs say not)
    params = [_save(model, name, value) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(shape.statement, params)
        row = cursor.fetchone()
    if row is None:
        return None
    loaded: dict[str, Any] = {}
    for part in shape.parts:
        end = part.start + len(part.names)
        values = _converted(row[part.start : end], shape.converters[part.start : end])
        instance = part.model.from_db(ALIAS, part.names, values) if values[part.pk_at] is not None else None
        loaded[part.path] = instance
        if part.fk is not None and loaded[part.parent] is not None:
            part.fk.set_cached_value(loaded[part.parent], instance)
    return loaded[""]


def exists(model: type[Model], **where: Any) -> bool:
    """Whether a ``model`` row's fields equal ``where`` (one plain statement); a value that
    cannot be the field's (a malformed UUID) raises ``ValidationError``, as the ORM does."""
    conditions = " AND ".join(f"{column(model, name)} = %s" for name in where)
    params = [_save(model, name, value) for name, value in where.items()]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT 1 FROM {table(model)} WHERE {conditions} LIMIT 1", params)
        return cursor.fetchone() is not None


def rows(model: type[Model], order_by: Sequence[str] = (), **where: Any) -> list[Any]:
    """Every ``model`` row whose fields equal ``where``, as instances the ORM would make,
    ordered by ``order_by`` (field names, ascending) — one plain statement."""
    concrete = model._meta.concrete_fields
    statement = f"SELECT {', '.join(column(model, f.name) for f in concrete)} FROM {table(model)}"
    statement += " WHERE " + " AND ".join(f"{column(model, name)} = %s" for name in where) if where else ""
    if order_by:
        statement += " ORDER BY " + ", ".join(column(model, name) for name in order_by)
    params = [_save(model, name, value) for name, value in where.items()]
    names = [f.attname for f in concrete]
    read = fetch(statement, params, [(model, f.name) for f in concrete])
    return [model.from_db(ALIAS, names, values) for values in read]


@dataclass(frozen=True)
class _Part:
    """One model's columns in a ``one()`` row: its path (``""`` for the row itself), the foreign
    key that reaches it from its parent path, its first column, attribute names, pk index."""

    path: str
    model: type[Model]
    fk: Any
    parent: str
    start: int
    names: list[str]
    pk_at: int


@dataclass(frozen=True)
class _Joined:
    statement: str
    converters: list[tuple[Any, list[Any]]]
    parts: list[_Part]


@functools.cache
def _joined(model: type[Model], related: tuple[str, ...], where: tuple[str, ...]) -> _Joined:
    """A ``one()`` shape's statement (models' metadata only: built once per process)."""
    joins: dict[str, tuple[str, type[Model], Any, str]] = {}  # path → alias, model, fk field, parent path
    for path in related:
        steps = path.split("__")
        for depth in range(1, len(steps) + 1):
            prefix = "__".join(steps[:depth])
            if prefix in joins:
                continue
            parent = "__".join(steps[: depth - 1])
            parent_model = joins[parent][1] if parent else model
            fk = parent_model._meta.get_field(steps[depth - 1])
            joins[prefix] = (f"t{len(joins) + 1}", fk.related_model, fk, parent)
    aliases: list[tuple[str, str, type[Model], Any, str]] = [("", "t0", model, None, "")]
    aliases += [(path, alias, rel, fk, parent) for path, (alias, rel, fk, parent) in joins.items()]
    columns: list[str] = []
    converters: list[tuple[Any, list[Any]]] = []
    parts: list[_Part] = []
    for path, alias, rel, fk, parent in aliases:
        concrete = rel._meta.concrete_fields
        pk_at = [f.primary_key for f in concrete].index(True)
        parts.append(_Part(path, rel, fk, parent, len(columns), [f.attname for f in concrete], pk_at))
        for field in concrete:
            columns.append(f"{alias}.{connection.ops.quote_name(field.column)}")
            converters.append(_converters(field))
    statement = f"SELECT {', '.join(columns)} FROM {table(model)} t0"
    for alias, rel, fk, parent in joins.values():
        parent_alias = joins[parent][0] if parent else "t0"
        statement += (
            f" LEFT JOIN {table(rel)} {alias} ON {alias}.{connection.ops.quote_name(rel._meta.pk.column)}"
            f" = {parent_alias}.{connection.ops.quote_name(fk.column)}"
        )
    if where:
        statement += " WHERE " + " AND ".join(f"t0.{column(model, name)} = %s" for name in where)
    return _Joined(statement, converters, parts)


def _converted(row: Sequence[Any], converters: Sequence[tuple[Any, list[Any]]]) -> list[Any]:
    values = []
    for value, (field, functions) in zip(row, converters, strict=True):
        for convert in functions:
            value = convert(value, field, connection)
        values.append(value)
    return values


def _field(model: type[Model], name: str) -> Field[Any, Any]:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return field


@functools.cache
def _converters(field: Field[Any, Any]) -> tuple[Any, list[Any]]:
    """What the ORM applies to a column of ``field`` read back (a model's metadata: fixed)."""
    col = field.get_col(field.model._meta.db_table)
    return col, [*connection.ops.get_db_converters(col), *field.get_db_converters(connection)]


def insert(model: type[Model], values: Mapping[str, Any], *, ignore_conflict: bool = False) -> bool:
    """Insert one ``model`` row: ``values`` by field name (a foreign key by its ``…_id``), every
    other field its default (``auto_now``/``auto_now_add`` fields: now), as ``Model.save``
    would. ``ignore_conflict``: a row that breaks a unique constraint is skipped (SQLite and
    PostgreSQL both say ``ON CONFLICT DO NOTHING``). True when a row was inserted."""
    now = timezone.now()
    names: list[str] = []
    params: list[Any] = []
    for field in model._meta.concrete_fields:
        if field.primary_key and field.attname not in values and field.name not in values and not field.has_default():
            continue  # an auto-increment id: the database's
        if field.attname in values:
            value = values[field.attname]
        elif field.name in values:
            value = values[field.name]
        elif getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            value = now
        else:
            value = field.get_default()
        names.append(connection.ops.quote_name(field.column))
        params.append(field.get_db_prep_save(value, connection))
    placeholders = ", ".join(["%s"] * len(names))
    statement = f"INSERT INTO {table(model)} ({', '.join(names)}) VALUES ({placeholders})"
    if ignore_conflict:
        statement += " ON CONFLICT DO NOTHING"
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return bool(cursor.rowcount)


class Update:
    """One ``UPDATE`` of ``model`` rows matching ``where`` (field name → value, all equal):
    set values, add to counters, set a text only where it is empty, raise a number to at least
    a value — what Studio's hot writes need, without an ORM expression to resolve."""

    def __init__(self, model: type[Model], **where: Any) -> None:
        self.model, self.where = model, where
        self._set: list[tuple[str, list[Any]]] = []

    def set(self, name: str, value: Any) -> Update:
        self._set.append((f"{column(self.model, name)} = %s", [_save(self.model, name, value)]))
        return self

    def add(self, name: str, delta: Any) -> Update:
        col = column(self.model, name)
        expression = f"{col} + %s"
        if connection.vendor == "sqlite" and isinstance(_field(self.model, name), DecimalField):
            expression = f"CAST(({expression}) AS NUMERIC)"  # what Django's SQLite backend writes
        self._set.append((f"{col} = {expression}", [_save(self.model, name, delta)]))
        return self

    def set_if_empty(self, name: str, value: str) -> Update:
        col = column(self.model, name)
        self._set.append((f"{col} = CASE WHEN {col} = %s THEN %s ELSE {col} END", ["", value]))
        return self

    def at_least(self, name: str, value: int) -> Update:
        col = column(self.model, name)
        greatest = "MAX" if connection.vendor == "sqlite" else "GREATEST"
        self._set.append((f"{col} = {greatest}({col}, %s)", [_save(self.model, name, value)]))
        return self

    def run(self) -> int:
        """Run it (nothing to set: nothing run); the number of rows changed."""
        if not self._set:
            return 0
        assignments = ", ".join(sql for sql, _ in self._set)
        conditions = " AND ".join(f"{column(self.model, name)} = %s" for name in self.where)
        params = [p for _, values in self._set for p in values]
        params += [_save(self.model, name, value) for name, value in self.where.items()]
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table(self.model)} SET {assignments} WHERE {conditions}", params)
            return int(cursor.rowcount)


def _save(model: type[Model], name: str, value: Any) -> Any:
    return _field(model, name).get_db_prep_save(value, connection)
