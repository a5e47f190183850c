"""Which vector index a store's settings name, opened in one place for the store and the indexer's worker.

``Settings.vector_uri``: unset, the embedded milvus-lite index in ``path``; ``http://host:19530``, a
Milvus server; ``pgvector``, a pgvector table in the records' own PostgreSQL database; a PostgreSQL URL,
a pgvector table in that database.
"""

from __future__ import annotations

from typing import Union

from ..config import Settings
from ..errors import ConfigError
from .pgvector import PGVECTOR, PgVectorIndex, is_pgvector_uri
from .vectors import MilvusVectorIndex, is_server_uri

__all__ = ["AnyVectorIndex", "open_vector_index", "vector_backend", "vector_location"]

#: the vector indexes a store may open
AnyVectorIndex = Union[MilvusVectorIndex, PgVectorIndex]


def vector_backend(settings: Settings) -> str:
    """"pgvector", "milvus" (a Milvus server's URI) or "milvus-lite" (a directory this process opens)."""
    uri = settings.resolved_vector_uri
    if is_pgvector_uri(uri):
        return "pgvector"
    return "milvus" if is_server_uri(uri) else "milvus-lite"


def vector_location(settings: Settings) -> str:
    """Where the index lives: ``resolved_vector_uri``, with ``pgvector`` resolved to the records' database
    (which must then be PostgreSQL)."""
    uri = settings.resolved_vector_uri
    if uri != PGVECTOR:
        return uri
    db = settings.resolved_db_url
    if not is_pgvector_uri(db):
        raise ConfigError("vector_uri='pgvector' keeps the vectors in the records' PostgreSQL database, but db_url "
                          "is not PostgreSQL: set db_url to postgresql+psycopg://USER@HOST/DB, or give vector_uri "
                          "the PostgreSQL URL of a database with pgvector")
    return db


def open_vector_index(settings: Settings, *, model: str, dim: int, uri: str | None = None,
                      local_server: bool = False) -> AnyVectorIndex:
    """The index ``settings`` name (``uri``: an address another process gave, ``MilvusVectorIndex.address``
    or the pgvector database's URL), for the embedding ``model`` of ``dim`` dimensions."""
    location = uri if uri is not None else vector_location(settings)
    if is_pgvector_uri(location):
        return PgVectorIndex(location, model=model, dim=dim, hnsw_above=settings.vector_hnsw_above,
                             half=settings.vector_halfvec)
    return MilvusVectorIndex(location, model=model, dim=dim, token=settings.vector_token,
                             partition_per_user=settings.partition_per_user,
                             process="inline" if uri is not None else settings.resolved_vector_process,
                             local_server=local_server)
