"""Exact per-user BM25 from a postings table, in one SQL statement, on SQLite and PostgreSQL alike.

Each record's search tokens (the project's own tokeniser, so Chinese is segmented by jieba) are kept
as postings ``(tenant_id, user_id, term, record) -> (tf, doc_len)``; ``keyword_df`` counts per user
and term how many records hold it, and ``keyword_users`` holds each user's record count and total
length. A search reads only the postings of its own terms for its own user, and scores them with the
same formula and statistics as :func:`portamem.read.candidates.bm25_idf` and the read path's scorer, so its
top k is the exact per-user BM25 top k. Every change happens in the caller's transaction.

A record also has a posting under the empty term (never a search token), which remembers its length
for the counts when it is dropped.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..language.text import tokenize
from . import fast
from .dialect import add_counts
from .termcache import Postings, TermCache

__all__ = ["PostingsKeywordIndex", "keyword_md", "BM25_K1", "BM25_B", "TERM_CHARS"]

#: BM25's usual term-saturation and length constants
BM25_K1 = 1.2
BM25_B = 0.75
#: longer tokens are cut to this for storage
TERM_CHARS = 256
#: the posting every record has, whatever its text
_MARK = ""
#: a search ranks this many times k records from the postings before it looks at their rows
_SHORTLIST = 4
#: how far (times k) the shortlist grows when a filter admits few of it, before the join ranks them all
_DEEPEST = 256

keyword_md = sa.MetaData()
_INSERT_POSTING = ("INSERT INTO keyword_postings (tenant_id, user_id, term, record, tf, doc_len) "
                   "VALUES (?, ?, ?, ?, ?, ?)")

postings_t = sa.Table(
    "keyword_postings",
    keyword_md,
    sa.Column("tenant_id", sa.String(256), nullable=False),
    sa.Column("user_id", sa.String(256), nullable=False),
    sa.Column("term", sa.String(TERM_CHARS), nullable=False),
    sa.Column("record", sa.Integer, nullable=False),
    sa.Column("tf", sa.Integer, nullable=False),
    sa.Column("doc_len", sa.Integer, nullable=False),
    # a search for one term of one user is one index range scan that needs no table lookups
    sa.PrimaryKeyConstraint("tenant_id", "user_id", "term", "record", postgresql_include=["tf", "doc_len"]),
    sa.Index("ix_postings_record", "record"),
    sqlite_with_rowid=False,
)

#: per user and search token, how many of the user's records hold it
df_t = sa.Table(
    "keyword_df",
    keyword_md,
    sa.Column("tenant_id", sa.String(256), primary_key=True),
    sa.Column("user_id", sa.String(256), primary_key=True),
    sa.Column("term", sa.String(TERM_CHARS), primary_key=True),
    sa.Column("df", sa.Integer, nullable=False),
)

users_t = sa.Table(
    "keyword_users",
    keyword_md,
    sa.Column("tenant_id", sa.String(256), primary_key=True),
    sa.Column("user_id", sa.String(256), primary_key=True),
    sa.Column("n", sa.Integer, nullable=False),
    sa.Column("total_len", sa.BigInteger, nullable=False),
)

#: (record primary key, tenant, user, text) of one record
Entry = tuple[int, str, str, str]


def _terms(tokens: Iterable[str]) -> list[str]:
    return sorted({t[:TERM_CHARS] for t in tokens if t})


def _f8(x: Any) -> Any:
    # float8 throughout: numeric arithmetic was several times slower on PostgreSQL
    return sa.cast(x, sa.Double)


class PostingsKeywordIndex:
    """The keyword index of a record store (one per store; stateless between calls)."""

    tables = (postings_t, df_t, users_t)

    def __init__(self, cache: TermCache | None = None) -> None:
        #: the postings searches read, in memory (``portamem.storage.termcache``), where one process owns the store
        self.cache = cache

    # ---------------------------------------------------------------- writes
    def add(self, conn: Connection, entries: Sequence[Entry]) -> None:
        """Index records (their primary keys must not be indexed already)."""
        rows: list[dict[str, Any]] = []
        df: Counter[tuple[str, str, str]] = Counter()
        users: dict[tuple[str, str], list[int]] = {}
        for pk, tenant_id, user_id, text in entries:
            counts = Counter(t[:TERM_CHARS] for t in tokenize(text) if t)
            rows.append({"tenant_id": tenant_id, "user_id": user_id, "term": _MARK, "record": pk,
                         "tf": 0, "doc_len": len(text)})
            rows.extend({"tenant_id": tenant_id, "user_id": user_id, "term": term, "record": pk,
                         "tf": tf, "doc_len": len(text)} for term, tf in counts.items())
            df.update((tenant_id, user_id, term) for term in counts)
            totals = users.setdefault((tenant_id, user_id), [0, 0])
            totals[0] += 1
            totals[1] += len(text)
        if not rows:
            return
        if conn.dialect.name == "sqlite":  # raw sqlite3 (``storage.fast``): a save writes a dozen postings
            fast.executemany(conn, _INSERT_POSTING, [(r["tenant_id"], r["user_id"], r["term"], r["record"], r["tf"],
                                                      r["doc_len"]) for r in rows])
        else:
            conn.execute(postings_t.insert(), rows)
        self._count(conn, users, df)
        if self.cache is not None:
            TermCache.note(conn, ("add", rows, users))

    def drop(self, conn: Connection, pks: Sequence[int]) -> None:
        """Remove records from the index and their share of the counts."""
        pks = list(dict.fromkeys(pks))
        df: Counter[tuple[str, str, str]] = Counter()
        users: dict[tuple[str, str], list[int]] = {}
        removed: list[tuple[str, str, str, int]] = []
        for start in range(0, len(pks), 500):
            chunk = pks[start:start + 500]
            q = sa.select(postings_t.c.tenant_id, postings_t.c.user_id, postings_t.c.term, postings_t.c.doc_len,
                          postings_t.c.record)
            for tenant_id, user_id, term, doc_len, pk in conn.execute(q.where(postings_t.c.record.in_(chunk))):
                if term == _MARK:
                    totals = users.setdefault((tenant_id, user_id), [0, 0])
                    totals[0] -= 1
                    totals[1] -= doc_len
                else:
                    df[(tenant_id, user_id, term)] -= 1
                    removed.append((tenant_id, user_id, term, int(pk)))
            conn.execute(postings_t.delete().where(postings_t.c.record.in_(chunk)))
        self._count(conn, users, df)
        # a term no record of the user holds any more leaves the counts too: a forgotten text's words
        # must not outlive it there
        emptied: dict[tuple[str, str], list[str]] = {}
        for (tenant_id, user_id, term), d in df.items():
            if d:
                emptied.setdefault((tenant_id, user_id), []).append(term)
        for (tenant_id, user_id), terms in emptied.items():
            for start in range(0, len(terms), 500):
                conn.execute(df_t.delete().where(df_t.c.tenant_id == tenant_id, df_t.c.user_id == user_id,
                                                 df_t.c.term.in_(terms[start:start + 500]), df_t.c.df <= 0))
        if self.cache is not None:
            TermCache.note(conn, ("drop", removed, users))

    @staticmethod
    def _count(conn: Connection, users: dict[tuple[str, str], list[int]], df: Counter[tuple[str, str, str]]) -> None:
        # users first, then terms, each in key order: one lock order for every writer
        add_counts(conn, users_t, ("tenant_id", "user_id"),
                   [{"tenant_id": t, "user_id": u, "n": n, "total_len": length} for (t, u), (n, length) in users.items()])
        add_counts(conn, df_t, ("tenant_id", "user_id", "term"),
                   [{"tenant_id": t, "user_id": u, "term": w, "df": d} for (t, u, w), d in df.items() if d])

    def recount(self, conn: Connection) -> None:
        """Derive the counters from the postings again (after postings were copied in as they are)."""
        p = postings_t.c
        self._forget_all(conn)
        conn.execute(df_t.delete())
        conn.execute(users_t.delete())
        conn.execute(df_t.insert().from_select(
            ["tenant_id", "user_id", "term", "df"],
            sa.select(p.tenant_id, p.user_id, p.term, sa.func.count()).where(p.term != _MARK)
            .group_by(p.tenant_id, p.user_id, p.term),
        ))
        conn.execute(users_t.insert().from_select(
            ["tenant_id", "user_id", "n", "total_len"],
            sa.select(p.tenant_id, p.user_id, sa.func.count(), sa.func.sum(p.doc_len)).where(p.term == _MARK)
            .group_by(p.tenant_id, p.user_id),
        ))

    def clear(self, conn: Connection) -> None:
        self._forget_all(conn)
        for table in self.tables:
            conn.execute(table.delete())

    def _forget_all(self, conn: Connection) -> None:
        """Empty the cache now (no search caches the old state again: the caller holds the write lock)
        and once more at the commit (what a search loaded meanwhile from another connection)."""
        if self.cache is not None:
            self.cache.clear()
            TermCache.note(conn, ("clear",))

    # ---------------------------------------------------------------- reads
    def size(self, conn: Connection, tenant_id: str, user_id: str) -> int:
        """How many records the user has (every record has a posting): one key lookup."""
        if self.cache is not None:
            return self._cached(conn, tenant_id, user_id, [])[0][0]
        return self._user_totals(conn, tenant_id, user_id)[0]

    @staticmethod
    def _user_totals(conn: Connection, tenant_id: str, user_id: str) -> tuple[int, int]:
        if conn.dialect.name == "sqlite":
            row = fast.driver(conn).execute(f"SELECT n, total_len FROM {users_t.name} WHERE tenant_id = ? "
                                            "AND user_id = ?", (tenant_id, user_id)).fetchone()
        else:  # raw psycopg: read two or three times by every search
            with fast.driver(conn).cursor() as cur:
                row = cur.execute(f"SELECT n, total_len FROM {users_t.name} WHERE tenant_id = %s AND user_id = %s",
                                  (tenant_id, user_id)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _cached(self, conn: Connection, tenant_id: str, user_id: str,
                terms: Sequence[str]) -> tuple[tuple[int, int], dict[str, Postings]]:
        assert self.cache is not None

        def load_terms(todo: Sequence[str]) -> dict[str, tuple[list[int], list[int], list[int]]]:
            out: dict[str, tuple[list[int], list[int], list[int]]] = {}
            p = postings_t.c
            for start in range(0, len(todo), 500):
                chunk = list(todo[start:start + 500])
                if conn.dialect.name == "sqlite":
                    rows = fast.driver(conn).execute(
                        f"SELECT term, record, tf, doc_len FROM {postings_t.name} WHERE tenant_id = ? AND user_id = ? "
                        f"AND term IN ({fast.marks(len(chunk))})", (tenant_id, user_id, *chunk))
                else:
                    rows = conn.execute(sa.select(p.term, p.record, p.tf, p.doc_len).where(
                        p.tenant_id == tenant_id, p.user_id == user_id, p.term.in_(chunk)))
                for term, pk, tf, dl in rows:
                    got = out.setdefault(term, ([], [], []))
                    got[0].append(pk)
                    got[1].append(tf)
                    got[2].append(dl)
            return out

        return self.cache.get(tenant_id, user_id, terms, load_terms,
                              lambda: self._user_totals(conn, tenant_id, user_id))

    def stats(self, conn: Connection, tenant_id: str, user_id: str, tokens: Sequence[str]) -> tuple[int, float, dict[str, int]]:
        """The user's record count, mean text length, and per token how many records hold it."""
        if self.cache is not None:
            (n, total), postings = self._cached(conn, tenant_id, user_id, _terms(tokens))
            return n, (total / n if n else 0.0), {t: len(postings[t[:TERM_CHARS]].pk) for t in tokens if t}
        n, total = self._user_totals(conn, tenant_id, user_id)
        terms = _terms(tokens)
        found: dict[str, int] = {}
        sql = f"SELECT term, df FROM {df_t.name} WHERE tenant_id = ? AND user_id = ? AND term IN "
        for start in range(0, len(terms), 500):  # raw statements (``fast``) on either backend
            chunk = terms[start:start + 500]
            if conn.dialect.name == "sqlite":
                rows = fast.driver(conn).execute(f"{sql}({fast.marks(len(chunk))})", (tenant_id, user_id, *chunk))
            else:
                with fast.driver(conn).cursor() as cur:
                    rows = cur.execute(f"SELECT term, df FROM {df_t.name} WHERE tenant_id = %s AND user_id = %s "
                                       "AND term = ANY(%s::text[])", (tenant_id, user_id, chunk)).fetchall()
            found.update({r[0]: int(r[1]) for r in rows})
        return n, (total / n if n else 0.0), {t: found.get(t[:TERM_CHARS], 0) for t in tokens if t}

    def search(
        self,
        conn: Connection,
        tenant_id: str,
        user_id: str,
        tokens: Sequence[str],
        k: int,
        records: sa.Table,
        where: Sequence[Any] = (),
        where_sql: tuple[str, Sequence[Any]] | None = None,
        selective: bool = False,
    ) -> list[tuple[str, float]]:
        """The user's k best records by exact BM25 among those ``where`` admits: (memory_id, score).

        The user's (n, total_len), each term's idf from ``keyword_df`` and the postings of those terms,
        summed per record, in one statement. The best ``_SHORTLIST * k`` records by (score, pk) are
        ranked from the postings alone and then checked against ``records`` (which has ``pk`` and
        ``memory_id``); joining every scored record to its row first cost most of a search. When too few
        of them pass ``where``, the join ranks them all: the same order either way, so the same top k.
        ``where_sql``: the same check as SQL text over ``records`` on SQLite (run raw, ``storage.fast``).
        ``selective``: ``where`` is expected to admit few records (a metadata filter): the shortlist
        starts 8 times as long.
        """
        terms = _terms(tokens)
        if not terms or k <= 0:
            return []
        room = _SHORTLIST * k * (8 if selective else 1)
        admitted: dict[int, str] = {}
        checked: set[int] = set()
        # a selective filter (a metadata one) admits few of the shortlist: the shortlist grows, and only
        # its new records are checked, before the join ranks every scored record
        while True:
            if self.cache is not None:
                short = self._cached_shortlist(conn, tenant_id, user_id, terms, room)
            else:
                short = [(int(r[0]), float(r[1])) for r in conn.execute(
                    _shortlist(), {"tenant": tenant_id, "user": user_id, "terms": terms, "room": room})]
            new = [pk for pk, _ in short if pk not in checked]
            checked.update(new)
            if new and where_sql is not None and conn.dialect.name == "sqlite":
                admitted.update({int(r[0]): r[1] for r in fast.driver(conn).execute(
                    f"SELECT pk, memory_id FROM {records.name} WHERE pk IN ({fast.marks(len(new))}) "
                    f"AND {where_sql[0]}", (*new, *where_sql[1]))})
            elif new:
                admitted.update({int(r[0]): r[1] for r in conn.execute(
                    sa.select(records.c.pk, records.c.memory_id).where(records.c.pk.in_(new), *where))})
            found = [(admitted[pk], score) for pk, score in short if pk in admitted][:k]
            if len(found) == k or len(short) < room:
                return found
            if room >= _DEEPEST * k:
                break
            room *= 8
        scores = _score_query(tenant_id, user_id, terms)
        q = (
            sa.select(records.c.memory_id, scores.c.score)
            .select_from(scores.join(records, records.c.pk == scores.c.record))
            .where(*where)
            .order_by(scores.c.score.desc(), records.c.pk.desc())
            .limit(k)
        )
        return [(r[0], float(r[1])) for r in conn.execute(q)]


    def _cached_shortlist(self, conn: Connection, tenant_id: str, user_id: str, terms: Sequence[str],
                          room: int) -> list[tuple[int, float]]:
        """What ``_shortlist`` selects, scored in memory from the cached postings by the same formula."""
        (n, total), postings = self._cached(conn, tenant_id, user_id, terms)
        if n <= 0:
            return []
        avgdl = total / n
        keys, parts = [], []
        for term in terms:
            p = postings[term]
            df = len(p.pk)
            if not df:
                continue
            raw = math.log((n - df + 0.5) / (df + 0.5))
            tf, dl = p.tf.astype(np.float64), p.dl.astype(np.float64)
            keys.append(p.pk)
            parts.append((raw if raw > 0 else 1e-6) * tf * (BM25_K1 + 1.0)
                         / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avgdl)))
        if not keys:
            return []
        if len(keys) == 1:
            pks, scores = keys[0], parts[0]
        else:
            pks, where = np.unique(np.concatenate(keys), return_inverse=True)
            scores = np.bincount(where, weights=np.concatenate(parts), minlength=len(pks))
        if len(pks) > room:  # every record scoring at least the room-th best, ties included
            cut = np.partition(scores, len(scores) - room)[len(scores) - room]
            keep = scores >= cut
            pks, scores = pks[keep], scores[keep]
        order = np.lexsort((-pks, -scores))[:room]  # score, then key, both descending
        return [(int(pks[i]), float(scores[i])) for i in order]


def _score_query(tenant_id: Any, user_id: Any, terms: Any) -> Any:
    """(record, score): the BM25 of each of the user's records holding any of ``terms`` (values or
    bound parameters)."""
    user = (
        sa.select(_f8(users_t.c.n).label("n"), (_f8(users_t.c.total_len) / _f8(users_t.c.n)).label("avgdl"))
        .where(users_t.c.tenant_id == tenant_id, users_t.c.user_id == user_id, users_t.c.n > 0)
        .cte("bm25_user")
    )
    raw_idf = sa.func.ln((user.c.n - _f8(df_t.c.df) + 0.5) / (_f8(df_t.c.df) + 0.5))
    idf = (
        sa.select(df_t.c.term, sa.case((raw_idf > 0, raw_idf), else_=1e-6).label("idf"))
        .select_from(df_t.join(user, sa.true()))
        .where(df_t.c.tenant_id == tenant_id, df_t.c.user_id == user_id, df_t.c.term.in_(terms), df_t.c.df > 0)
        .cte("bm25_idf")
    )
    p = postings_t.c
    tf, dl = _f8(p.tf), _f8(p.doc_len)
    term_score = idf.c.idf * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / user.c.avgdl))
    return (
        sa.select(p.record, sa.func.sum(term_score).label("score"))
        .select_from(postings_t.join(idf, p.term == idf.c.term).join(user, sa.true()))
        .where(p.tenant_id == tenant_id, p.user_id == user_id, p.term.in_(terms))
        .group_by(p.record)
        .subquery("bm25")
    )


@lru_cache(maxsize=1)
def _shortlist() -> Any:
    """The best ``room`` records by (score, pk) from the postings alone; built once, since building
    the statement cost as much as running it."""
    scores = _score_query(sa.bindparam("tenant"), sa.bindparam("user"), sa.bindparam("terms", expanding=True))
    return (sa.select(scores.c.record, scores.c.score).order_by(scores.c.score.desc(), scores.c.record.desc())
            .limit(sa.bindparam("room")))
