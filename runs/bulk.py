"""Many rows in few statements, without an ORM object (or the ORM's per-value SQL compile) for each.

A run writes every item twice (created when it starts, stored when it finishes) and a point
assessment for every point: thousands of rows a minute on one worker. ``insert`` and ``update_each``
build their SQL once per batch shape and convert values as the ORM does (``get_db_prep_save``),
taking the plain Python value where the driver needs no conversion. They run inside the caller's
transaction; ``runs/records.py`` and ``runs/start.py`` are their callers.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from django.db import connection, models

from runs.engine import jsonfast
from django.db.backends.base.operations import BaseDatabaseOperations

# Field types whose Python value the database drivers (sqlite3, psycopg) take as it is.
_AS_IS = {
    "AutoField", "BigAutoField", "BigIntegerField", "BooleanField", "CharField", "FloatField", "ForeignKey",
    "IntegerField", "PositiveBigIntegerField", "PositiveIntegerField", "PositiveSmallIntegerField",
    "SmallIntegerField", "TextField",
}


def _converter(field: models.Field) -> Callable | None:
    if field.get_internal_type() in _AS_IS:
        return None
    if isinstance(field, models.JSONField) and field.encoder is None \
            and type(connection.ops).adapt_json_value is BaseDatabaseOperations.adapt_json_value:
        # What the ORM's JSONField stores there (SQLite: the value's JSON text), without its layers of calls per
        # value (a finished item has ten JSON columns, a judged point one); written compactly by orjson, the
        # standard library where orjson refuses a value (one JSON cannot hold still raises TypeError).
        return _json_text
    return lambda value: field.get_db_prep_save(value, connection)


def _json_text(value) -> str:
    return jsonfast.dumps(value).decode("utf-8")


class _Columns:
    """The columns of one batch shape: their quoted names and how each value is converted."""

    _made: dict[tuple, "_Columns"] = {}

    @classmethod
    def of(cls, model: type[models.Model], names: Sequence[str]) -> "_Columns":
        """The columns of this shape, worked out once per process and database (a batch of 25 items had made them
        again for every batch)."""
        key = (connection.alias, connection.vendor, model, tuple(names))
        made = cls._made.get(key)
        if made is None:
            made = cls._made[key] = cls(model, names)
        return made

    def __init__(self, model: type[models.Model], names: Sequence[str]):
        opts = model._meta
        self.fields = [opts.get_field(name) for name in names]
        self.names = [f.attname for f in self.fields]
        self.quoted = [connection.ops.quote_name(f.column) for f in self.fields]
        self.convert = [_converter(f) for f in self.fields]

    def values(self, row: dict) -> list:
        out = []
        for name, convert in zip(self.names, self.convert):
            value = row[name]
            out.append(value if convert is None or value is None else convert(value))
        return out


def _concrete(model: type[models.Model]) -> list[models.Field]:
    return [f for f in model._meta.concrete_fields if not f.primary_key]


def insert(model: type[models.Model], rows: Iterable[dict], *, batch_size: int = 500) -> int:
    """Insert rows given as ``{attname: value}``; a column a row leaves out takes the field's default.

    Returns how many rows went in. Primary keys are not read back: callers find rows by their keys.
    """
    fields = _concrete(model)
    defaults = {f.attname: f.get_default() for f in fields}
    columns = _Columns.of(model, [f.name for f in fields])
    table = connection.ops.quote_name(model._meta.db_table)
    sql = f"INSERT INTO {table} ({', '.join(columns.quoted)}) VALUES ({', '.join(['%s'] * len(fields))})"
    count = 0
    batch: list[list] = []
    # The defaults are converted once; a row converts only the columns it gives (a run's items leave seven
    # JSON columns to their defaults: converting those for every row was most of making 200,000 items).
    base = columns.values(defaults)
    where = {name: (i, convert) for i, (name, convert) in enumerate(zip(columns.names, columns.convert))}
    with connection.cursor() as cursor:
        for row in rows:
            unknown = row.keys() - defaults.keys()
            if unknown:
                raise ValueError(f"{model.__name__} has no column {sorted(unknown)[0]!r}")
            values = list(base)
            for name, value in row.items():
                i, convert = where[name]
                values[i] = value if convert is None or value is None else convert(value)
            batch.append(values)
            if len(batch) >= batch_size:
                cursor.executemany(sql, batch)
                count += len(batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)
            count += len(batch)
    return count


def update_each(model: type[models.Model], changes: Sequence[tuple[int, dict]], *, where: dict) -> list[bool]:
    """Set each row's own columns (``(pk, {attname: value})``) where its pk and ``where`` match.

    Returns, for each change, whether its row was updated (a row whose ``where`` no longer holds,
    say an item another worker took over, is left alone). One prepared statement per shape of change.
    """
    table = connection.ops.quote_name(model._meta.db_table)
    pk = connection.ops.quote_name(model._meta.pk.column)
    condition = _Columns.of(model, list(where))
    condition_values = condition.values({f.attname: where[name] for f, name in zip(condition.fields, where)})
    shapes: dict[tuple, tuple[str, _Columns]] = {}
    updated = []
    with connection.cursor() as cursor:
        for key, fields in changes:
            shape = tuple(fields)
            if shape not in shapes:
                columns = _Columns.of(model, shape)
                assignments = ", ".join(f"{q} = %s" for q in columns.quoted)
                checks = "".join(f" AND {q} = %s" for q in condition.quoted)
                shapes[shape] = (f"UPDATE {table} SET {assignments} WHERE {pk} = %s{checks}", columns)
            sql, columns = shapes[shape]
            cursor.execute(sql, [*columns.values(fields), key, *condition_values])
            updated.append(cursor.rowcount == 1)
    return updated


def add_to(model: type[models.Model], pk: int, amounts: dict[str, float | int]) -> int:
    """Add each amount to its column of one row (``{attname: amount}``), in one prepared UPDATE: what
    ``update(**{name: F(name) + amount})`` does, without the ORM resolving an expression (and making a field) for
    each value, which was most of storing a batch's counters. A NULL column stays NULL, as with F(). Returns the
    rows updated (0 or 1)."""
    if not amounts:
        return 0
    columns = _Columns.of(model, list(amounts))
    sets = ", ".join(f"{q} = {q} + %s" for q in columns.quoted)
    table = connection.ops.quote_name(model._meta.db_table)
    key = connection.ops.quote_name(model._meta.pk.column)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {sets} WHERE {key} = %s", [*amounts.values(), pk])
        return cursor.rowcount
