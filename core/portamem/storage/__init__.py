"""Storage backends behind small protocols: record stores (SQLite, PostgreSQL), keyword index, vector index."""

from .protocols import KeywordIndex, RecordStore, VectorIndex

__all__ = ["KeywordIndex", "RecordStore", "VectorIndex"]
