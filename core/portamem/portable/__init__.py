"""Portability: memory that leaves one install and arrives whole in another.

- ``transfer``: export and import as checksummed JSON lines (all or nothing, guarded and redacted
  again on the way in);
- ``wire``: records, hits, findings and errors as JSON for the HTTP API and ``RemoteMemory``;
- ``keys``: keyed memories, addressed by (namespace, key) as a framework's key-value store needs.

May import: everything below it (the data model, ``portamem.components``, storage, the write,
background and read paths, lifecycle); never the ``Memory`` facade, the server or the CLI.
"""
