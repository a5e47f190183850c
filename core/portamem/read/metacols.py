"""Metadata filters over the read replica: each filtered key as typed columns, built on its first use.

A filtered vector search must not read the user's rows back from the store (a JSON scan of 100k
rows costs more than the search), nor test each row's dict in Python. The replica keeps each row's
metadata as it came (the stored JSON text, or the record's dict) and, for every key a filter names,
three columns: the value's kind, its number, and its string as a code into the key's vocabulary.
A condition is then a few array comparisons; an order on strings is tested once per distinct string.
The semantics are ``portamem.filters.MetadataCondition.test``'s, which the tests hold both to.

May import: the data model.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..filters import METADATA_MAX_CONDITIONS, MetadataCondition, MetadataFilter

__all__ = ["MetaColumns", "MAX_COLUMNS"]

#: the keys whose columns a user's replica keeps, the least recently filtered on dropped first: as many
#: as one filter may name, so a filter's columns are never rebuilt while it is tested, and no more, so
#: callers naming ever new keys cannot grow the replica without bound (each column is 13 bytes a row)
MAX_COLUMNS = METADATA_MAX_CONDITIONS

#: the kinds of a value: absent, null, boolean, number, string, anything else (a list, an object)
MISSING, NULL, BOOL, NUMBER, STRING, OTHER = range(6)
_CMP = {"$gt": np.greater, "$gte": np.greater_equal, "$lt": np.less, "$lte": np.less_equal}
_PY_CMP = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b,
           "$lte": lambda a, b: a <= b}


def parsed(raw: Any) -> Mapping[str, Any] | None:
    """A row's metadata as a mapping (None when empty), from the stored JSON text or a dict."""
    if raw is None:
        return None
    if isinstance(raw, (str, bytes)):
        if raw in ("{}", b"{}", ""):
            return None
        raw = json.loads(raw)
    return raw if isinstance(raw, Mapping) and raw else None


class _Column:
    def __init__(self, cap: int) -> None:
        self.kind = np.zeros(cap, dtype=np.int8)
        self.num = np.zeros(cap, dtype=np.float64)
        self.code = np.full(cap, -1, dtype=np.int32)
        self.vocab: dict[str, int] = {}

    def set(self, i: int, v: Any) -> None:
        self.code[i] = -1
        self.num[i] = 0.0
        if v is _ABSENT:
            self.kind[i] = MISSING
        elif v is None:
            self.kind[i] = NULL
        elif isinstance(v, bool):
            self.kind[i], self.num[i] = BOOL, float(v)
        elif isinstance(v, (int, float)) and abs(v) < 1e308:
            self.kind[i], self.num[i] = NUMBER, float(v)
        elif isinstance(v, str):
            self.kind[i] = STRING
            self.code[i] = self.vocab.setdefault(v, len(self.vocab))
        else:
            self.kind[i] = OTHER

    def eq(self, x: Any, n: int) -> np.ndarray:
        kind = self.kind[:n]
        if x is None:
            return (kind == MISSING) | (kind == NULL)
        if isinstance(x, bool):
            return (kind == BOOL) & (self.num[:n] == float(x))
        if isinstance(x, (int, float)):
            return (kind == NUMBER) & (self.num[:n] == float(x))
        code = self.vocab.get(x)
        return np.zeros(n, dtype=bool) if code is None else self.code[:n] == code

    def among(self, c: MetadataCondition, n: int) -> np.ndarray:
        """Which rows equal any of an ``$in`` / ``$nin`` list: one lookup per kind, whatever its length."""
        null, flags, numbers, strings = c.members
        kind = self.kind[:n]
        hit = (kind == MISSING) | (kind == NULL) if null else np.zeros(n, dtype=bool)
        if flags:
            hit |= (kind == BOOL) & np.isin(self.num[:n], [float(x) for x in flags])
        if numbers:
            hit |= (kind == NUMBER) & np.isin(self.num[:n], np.fromiter(numbers, dtype=np.float64))
        codes = [code for x in strings if (code := self.vocab.get(x)) is not None] \
            if len(strings) < len(self.vocab) else [code for x, code in self.vocab.items() if x in strings]
        if codes:
            hit |= np.isin(self.code[:n], codes)
        return hit

    def test(self, c: MetadataCondition, n: int) -> np.ndarray:
        if c.op == "$exists":
            present = self.kind[:n] != MISSING
            return present if c.value else ~present
        if c.op in ("$eq", "$ne"):
            hit = self.eq(c.value, n)
            return hit if c.op == "$eq" else ~hit
        if c.op in ("$in", "$nin"):
            hit = self.among(c, n)
            return hit if c.op == "$in" else ~hit
        if isinstance(c.value, str):  # an order on strings: decided once per distinct string
            ok = [code for s, code in self.vocab.items() if _PY_CMP[c.op](s, c.value)]
            return np.isin(self.code[:n], ok) if ok else np.zeros(n, dtype=bool)
        return (self.kind[:n] == NUMBER) & _CMP[c.op](self.num[:n], float(c.value))


_ABSENT = object()


def _lookup(meta: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    v: Any = meta
    for part in path:
        if not isinstance(v, Mapping) or part not in v:
            return _ABSENT
        v = v[part]
    return v


class MetaColumns:
    """Rows' metadata and the columns of the keys filtered on, kept in step with the replica's rows
    (the owner calls ``set`` for each row written, ``reset`` when rows move)."""

    def __init__(self) -> None:
        self.rows: list[Any] = []  # raw metadata per row (JSON text, a dict, or None)
        self._cols: OrderedDict[tuple[str, ...], _Column] = OrderedDict()

    def set(self, i: int, raw: Any) -> None:
        if i == len(self.rows):
            self.rows.append(raw)
        else:
            self.rows[i] = raw
        if self._cols:
            meta = parsed(raw)
            for path, col in self._cols.items():
                if i < len(col.kind):
                    col.set(i, _lookup(meta, path))
                else:  # the rows grew past the columns: rebuilt on their next use
                    self._cols.clear()
                    break

    def reset(self, rows: list[Any]) -> None:
        """The rows after a compaction: the columns are rebuilt on their next use."""
        self.rows = rows
        self._cols.clear()

    def _column(self, path: tuple[str, ...], n: int) -> _Column:
        col = self._cols.get(path)
        if col is None or len(col.kind) < n:
            col = _Column(max(16, len(self.rows), n) * 2)
            for i, raw in enumerate(self.rows):
                meta = self.rows[i] = parsed(raw)  # parsed once, whatever key comes next
                col.set(i, _lookup(meta, path))
            self._cols[path] = col
            while len(self._cols) > MAX_COLUMNS:
                self._cols.popitem(last=False)
        self._cols.move_to_end(path)
        return col

    def mask(self, f: MetadataFilter, n: int) -> np.ndarray:
        """Which of the first ``n`` rows the filter admits."""
        out = np.ones(n, dtype=bool)
        for c in f.conditions:
            out &= self._column(c.path, n).test(c, n)
        return out
