"""Lifecycle: what happens to memories over time and how to see why they are what they are.

- ``maintenance``: decay eviction through the policy hooks, consolidation of a pool over capacity,
  purge after the grace period, and the scheduled maintainer that runs it;
- ``forgetting``: soft delete (restorable until the grace period ends), restore and purge;
- ``audit``: the audit scan (weight that rose sharply, low-trust and pending memories);
- ``explain``: a memory's provenance and every search that returned it.

May import: the data model, ``portamem.components``, storage, and the write, background and read
paths; never portability or the ``Memory`` facade.
"""
