"""portamem_conformance: the contracts every portamem adapter meets, for built-in and third-party adapters.

An adapter's conformance test is one subclass plus one fixture returning a driver::

    # tests/test_conformance.py of your adapter
    import pytest
    from portamem_conformance import ConformanceTests
    from my_adapter.conformance import MyDriver

    class TestMyAdapter(ConformanceTests):
        @pytest.fixture
        def driver(self):
            return MyDriver()

The driver (see ``MemoryDriver`` for the protocol and its rules) maps the suite's neutral
actions (open, remember, recall, forget, write_turn, history, close and their async twins)
onto the framework calls a user would make. Capabilities are split into classes
(``RoundTripTests``, ``TurnTests``, ``IsolationTests``, ``ForgetTests``, ``RestartTests``,
``AsyncTests``, ``ErrorTests``, ``ChangeTests``: a value retired by its change stays retired); ``ConformanceTests`` is all of them. A driver declares
``supports_async = False`` instead of skipping tests itself.

The switching matrix (``SwitchingTests``) takes two drivers, ``writer`` and ``reader``:
memory written through one must come back through the other unchanged and ranked the
same. ``SharedStoreSwitchingTests`` runs its read-only contracts for one writer and many
readers on one written store; ``RelaySwitchingTests`` passes one conversation along a chain of
drivers, and ``relay_chains`` gives chains that take every ordered pair once. ``BUILTIN_DRIVERS``
is the matrix's registry (one entry per adapter); ``matrix_driver``, ``matrix_drivers`` and
``ordered_pairs`` build the matrix over installed adapters (absent ones are skipped),
``PORTAMEM_SWITCHING_FRAMEWORKS`` narrows it. A framework that cannot be installed beside the
others (``OTHER_ENVS``) is driven in a child process run by its own environment's interpreter
(``PORTAMEM_FRAMEWORK_PYTHONS``, ``portamem_conformance.child``).

The tests need a real embedder; pass a session-scoped one to your driver to load it once.
Importing this package registers its modules for pytest's assertion rewriting, so failures
show both sides.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("portamem_conformance.contracts", "portamem_conformance.switching")

from . import contracts, driver, switching  # noqa: E402
from .contracts import *  # noqa: E402,F403
from .driver import *  # noqa: E402,F403
from .switching import *  # noqa: E402,F403

__all__ = [*driver.__all__, *contracts.__all__, *switching.__all__]
