"""Storage: the record store (SQLite or PostgreSQL through SQLAlchemy: records, keyword postings,
entities, the working window, the outbox and the audit log), its schema and dialects, the BM25
keyword index and the Milvus vector index, behind the protocols the stages use.

May import: the data model only (records, errors, filters, text, entities); every stage sits above it.
"""

from .protocols import KeywordIndex, RecordStore, VectorIndex

__all__ = ["KeywordIndex", "RecordStore", "VectorIndex"]
