"""The write path: what happens to a save from the entry point to its acknowledged commit, and the
review that settles it once embedded.

- ``validation``: every entry point's checks (typed errors, nothing written on bad input);
- ``requests``: the drafts, saves and turns callers hand in;
- ``save``: a save after validation: guard and redaction (``privacy``), extraction, importance,
  then one transaction of rows, keyword entries, audit rows and outbox entries;
- ``window``: the working window's write side (write-triggers capture facts, turns that leave it
  become episodes and tool memories); ``batch``: many users' saves and turns in one transaction;
- the review the background indexer runs on embedded rows: ``trust`` (low-trust and contradicting
  rows held back), ``dedupe`` (repeats merged), ``supersession`` (a new value retires the old one).
- ``scope``: what a write may act on (its own tenant, user and agent scope) and what a derived memory
  inherits from its sources (the lowest trust, the narrowest scope, the strictest retention).

May import: the data model, settings, hooks, ``portamem.components`` and ``portamem.storage``; never
the read path, the background indexer or anything above them (``tests/core/test_layout.py``).
"""
