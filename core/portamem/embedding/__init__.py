"""Embedding models that load offline from installed packages (``embedders``: the registry, e5, USE,
sentence-transformers, worker processes) and the int8 ONNX Runtime graph of e5 (``e5int8``).

May import: the errors.
"""
