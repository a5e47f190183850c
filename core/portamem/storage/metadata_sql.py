"""Metadata filters (``portamem.filters.MetadataFilter``) as SQL over the stored JSON column.

SQLite reads the column with ``json_type`` / ``json_extract``, PostgreSQL with ``->``,
``json_typeof`` and ``#>>``. Each test checks the stored value's JSON type before comparing, so the
SQL agrees with ``MetadataCondition.test`` (the semantics the read replica and the Python checks
follow): a number matches only numbers, a string only strings (compared by code point: the
``"C"`` collation on PostgreSQL, SQLite's binary one), a boolean only booleans. Keys and operands
always travel as bound parameters, never as SQL text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import ColumnElement

from ..filters import MetadataCondition, MetadataFilter

__all__ = ["MetadataMatch", "metadata_sql"]

Bind = Callable[[Any], str]
_CMP = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sqlite(c: MetadataCondition, col: str, bind: Bind) -> str:
    # every placeholder is bound where it is written: the fast path's are positional. A key beyond
    # ASCII is looked up as written and as ``json.dumps`` escapes it (``\\u4f18``), which SQLite
    # before 3.45 compares as it is stored
    paths = list(dict.fromkeys(["$" + "".join(f'."{p}"' for p in c.path),
                                "$" + "".join(f'."{json.dumps(p)[1:-1]}"' for p in c.path)]))

    def t() -> str:
        return "COALESCE(" + ", ".join(f"json_type({col}, {bind(p)})" for p in paths) + ")" \
            if len(paths) > 1 else f"json_type({col}, {bind(paths[0])})"

    def x() -> str:
        return "COALESCE(" + ", ".join(f"json_extract({col}, {bind(p)})" for p in paths) + ")" \
            if len(paths) > 1 else f"json_extract({col}, {bind(paths[0])})"

    # the value's test first: it fails for most rows, and SQLite then skips the type's
    def eq(v: Any) -> str:
        if v is None:
            return f"COALESCE({t()}, 'null') = 'null'"
        if isinstance(v, bool):
            return f"COALESCE({t()} = '{'true' if v else 'false'}', 0)"
        if _is_number(v):
            return f"COALESCE({x()} = {bind(v)} AND {t()} IN ('integer', 'real'), 0)"
        return f"COALESCE({x()} = {bind(v)} AND {t()} = 'text', 0)"

    if c.op == "$exists":
        return f"({t()} IS {'NOT ' if c.value else ''}NULL)"
    if c.op in _CMP:
        kind = "IN ('integer', 'real')" if _is_number(c.value) else "= 'text'"
        return f"COALESCE({x()} {_CMP[c.op]} {bind(c.value)} AND {t()} {kind}, 0)"
    return _either(c, eq)


def _postgresql(c: MetadataCondition, col: str, bind: Bind) -> str:
    j = "(" + col + "".join(f" -> CAST({bind(p)} AS text)" for p in c.path) + ")"
    t = f"json_typeof({j})"
    txt = f"({j} #>> '{{}}')"
    num = f"CASE WHEN {t} = 'number' THEN CAST({txt} AS numeric) END"

    def eq(v: Any) -> str:
        if v is None:
            return f"COALESCE({t}, 'null') = 'null'"
        if isinstance(v, bool):
            return f"COALESCE({t} = 'boolean' AND {txt} = '{'true' if v else 'false'}', FALSE)"
        if _is_number(v):
            return f"COALESCE({num} = CAST({bind(v)} AS numeric), FALSE)"
        return f"COALESCE({t} = 'string' AND {txt} = CAST({bind(v)} AS text), FALSE)"

    if c.op == "$exists":
        return f"({j} IS {'NOT ' if c.value else ''}NULL)"
    if c.op in _CMP:
        if _is_number(c.value):
            return f"COALESCE({num} {_CMP[c.op]} CAST({bind(c.value)} AS numeric), FALSE)"
        return (f"COALESCE({t} = 'string' AND {txt} COLLATE \"C\" {_CMP[c.op]} "
                f"CAST({bind(c.value)} AS text) COLLATE \"C\", FALSE)")
    return _either(c, eq)


def _either(c: MetadataCondition, eq: Callable[[Any], str]) -> str:
    operands = c.value if c.op in ("$in", "$nin") else (c.value,)
    if not operands:  # $in [] admits nothing, $nin [] everything
        return "(1 = 0)" if c.op == "$in" else "(1 = 1)"
    any_of = "(" + " OR ".join(eq(v) for v in operands) + ")"
    return any_of if c.op in ("$eq", "$in") else f"(NOT {any_of})"


def metadata_sql(f: MetadataFilter, column: str, dialect: str, bind: Bind) -> str:
    """The filter as one SQL condition over ``column`` (the JSON metadata) in ``dialect``; ``bind``
    turns an operand into its placeholder (and keeps the value)."""
    leaf = _postgresql if dialect == "postgresql" else _sqlite
    return "(" + " AND ".join(leaf(c, column, bind) for c in f.conditions) + ")"


class MetadataMatch(ColumnElement[bool]):
    """A metadata filter as an SQLAlchemy condition, compiled for the connection's dialect."""

    type = sa.Boolean()
    inherit_cache = False  # the filter's values are not part of a cache key: never cached

    def __init__(self, column: Any, f: MetadataFilter) -> None:
        self.column = column
        self.filter = f


@compiles(MetadataMatch)
def _compile(element: MetadataMatch, compiler: Any, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)

    def bind(value: Any) -> str:
        return str(compiler.process(sa.bindparam(None, value, unique=True), **kw))

    return metadata_sql(element.filter, column, compiler.dialect.name, bind)
