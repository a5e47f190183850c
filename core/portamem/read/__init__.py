"""The read path: how a search finds, scores and presents memories.

- ``search``: one search after validation (``Search.run``) and the ``Retriever`` it uses;
- ``candidates``: the vector, BM25 keyword and exact-entity retrievers' candidates, each scored by
  every retriever;
- ``scoring``: where a search scores its candidates: the weighted sum of their components, trust,
  threshold, working-window and twin removal, conflicts, top-k;
- ``calibration``: each embedding model's background cosine, which makes vector scores absolute;
- ``replica``: the in-memory copy of users' vectors that vector search and the review read;
- ``usage``: the retrieval log and the uses (access counts) of the hits that reach a prompt;
- ``prompt``: the lines a prompt shows; ``trace``: the debug account of one search.

May import: the data model, ``portamem.components`` and ``portamem.storage``; never the write path,
the background indexer or anything above them (the indexer's queued rows come in as a callable).
"""
