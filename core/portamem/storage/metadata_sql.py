"""Metadata filters (``portamem.filters.MetadataFilter``) as SQL over the stored JSON column.

SQLite reads the column with ``json_type`` / ``json_extract``, PostgreSQL with ``->``,
``json_typeof`` and ``#>>``. Each test checks the stored value's JSON type before comparing, so the
SQL agrees with ``MetadataCondition.test`` (the semantics the read replica and the Python checks
follow): a number matches only numbers, a string only strings (compared by code point: the
``"C"`` collation on PostgreSQL, SQLite's binary one), a boolean only booleans. Keys and operands
always travel as bound parameters, never as SQL text.

An ``$in`` / ``$nin`` list is one membership test per kind of operand, its strings and its numbers
each bound as one JSON array read by ``json_each`` / ``json_array_elements_text``: the statement's
size does not grow with the list (a chain of 1000 ORs passed SQLite's expression depth limit, and
64 lists of 900 took minutes to prepare), and the database reads each list once into a lookup.
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
#: up to this many strings and numbers, a list is tested value by value (as ``$eq``)
_INLINE = 4


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

    # one JSON call per row for most rows: the value is extracted and tested first, its JSON type read
    # only for a value that passed (``json_extract`` gives NULL for a missing field and for null, 1 and 0
    # for true and false, the JSON text of an array or object), and a CASE, not an AND, so that a
    # missing field costs no second call either
    if c.op == "$exists":
        return f"({t()} IS {'NOT ' if c.value else ''}NULL)"
    if c.op in _CMP:
        kind = "IN ('integer', 'real')" if _is_number(c.value) else "= 'text'"
        return f"(CASE WHEN {x()} {_CMP[c.op]} {bind(c.value)} THEN {t()} {kind} ELSE 0 END)"
    null, flags, numbers, strings = _members(c)
    values = sorted(strings) + sorted(numbers)
    whens = [f"WHEN {x()} IS NULL THEN 1"] if null else []
    if values:  # each placeholder bound in the order it is written (the fast path's are positional)
        value = x()
        listed = ", ".join(bind(v) for v in values) if len(values) <= _INLINE \
            else f"SELECT value FROM json_each({bind(_array(values))})"
        # a string matches only text, a number only numbers: not an array's JSON text, not true's 1
        types = ["text", "integer", "real"] + [("true" if f else "false") for f in sorted(flags)]
        whens.append(f"WHEN {value} IN ({listed}) THEN {t()} IN ({', '.join(repr(k) for k in types)})")
    if flags:
        whens.append(f"WHEN {t()} IN ({', '.join(repr('true' if f else 'false') for f in sorted(flags))}) THEN 1")
    if not whens:  # $in [] admits nothing, $nin [] everything
        return "(1 = 0)" if c.op == "$in" else "(1 = 1)"
    test = f"(CASE {' '.join(whens)} ELSE 0 END)"
    return test if c.op in ("$eq", "$in") else f"(NOT {test})"


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
    def among(strings: list[str], numbers: list[Any]) -> list[str]:
        out = []
        if strings:
            out.append(f"COALESCE({t} = 'string' AND {txt} IN (SELECT json_array_elements_text("
                       f"CAST({bind(_array(strings))} AS json))), FALSE)")
        if numbers:
            out.append(f"COALESCE({num} IN (SELECT CAST(e AS numeric) FROM json_array_elements_text("
                       f"CAST({bind(_array(numbers))} AS json)) AS e), FALSE)")
        return out

    if c.op in _CMP:
        if _is_number(c.value):
            return f"COALESCE({num} {_CMP[c.op]} CAST({bind(c.value)} AS numeric), FALSE)"
        return (f"COALESCE({t} = 'string' AND {txt} COLLATE \"C\" {_CMP[c.op]} "
                f"CAST({bind(c.value)} AS text) COLLATE \"C\", FALSE)")
    return _either(c, eq, among)


def _members(c: MetadataCondition) -> tuple[bool, frozenset[bool], frozenset[Any], frozenset[str]]:
    """``MetadataCondition.members`` for ``$eq`` / ``$ne`` too (a list of one)."""
    if c.op in ("$in", "$nin"):
        return c.members
    v = c.value
    return (v is None, frozenset([v]) if isinstance(v, bool) else frozenset(),
            frozenset([v]) if _is_number(v) else frozenset(), frozenset([v]) if isinstance(v, str) else frozenset())


def _array(values: list[Any]) -> str:
    return json.dumps(values, ensure_ascii=False)


def _either(c: MetadataCondition, eq: Callable[[Any], str],
            among: Callable[[list[str], list[Any]], list[str]]) -> str:
    """``$eq`` / ``$in`` (and their negations) as a few tests whatever the list's length: null and
    each boolean tested by the value's type, the strings and the numbers each as one membership
    (sorted: the same filter is the same SQL text)."""
    if c.op in ("$eq", "$ne"):
        tests = [eq(c.value)]
    else:
        null, flags, numbers, strings = c.members
        if not (null or flags or numbers or strings):  # $in [] admits nothing, $nin [] everything
            return "(1 = 0)" if c.op == "$in" else "(1 = 1)"
        tests = [eq(v) for v in ([None] if null else []) + sorted(flags)]
        if len(strings) + len(numbers) <= _INLINE:
            tests += [eq(v) for v in sorted(strings) + sorted(numbers)]
        else:
            tests += among(sorted(strings), sorted(numbers))
    any_of = "(" + " OR ".join(tests) + ")"
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
