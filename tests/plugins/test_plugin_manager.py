"""The plugin manager: built-ins by name, block-list, loud failures that name the plugin."""

from __future__ import annotations

import inspect

import pluggy
import pytest

from portamem import Memory, PluginError, Settings, hookimpl, hookspecs
from portamem.pipeline import GuardVerdict
from portamem.plugins import DEFAULT_PLUGINS, Hooks, get_plugin_manager


def test_defaults_are_registered_by_name() -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    for name, module in DEFAULT_PLUGINS:
        assert pm.get_plugin(name).__name__ == module


def test_block_list_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("PORTAMEM_BLOCK_PLUGINS", "triggers, hybrid_scoring")
    pm = get_plugin_manager(load_entrypoints=False)
    assert pm.get_plugin("triggers") is None and pm.get_plugin("hybrid_scoring") is None
    assert pm.get_plugin("importance") is not None


def test_a_misspelt_hook_fails_loudly() -> None:
    class Typo:
        @hookimpl
        def portamem_write_triger(self, text):  # noqa: ANN001, ANN201
            return None

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Typo(), name="typo")
    with pytest.raises(pluggy.PluginValidationError):
        pm.check_pending()


def test_every_hook_is_documented_and_tested() -> None:
    import pathlib

    tests = "".join(p.read_text(encoding="utf-8") for p in pathlib.Path(__file__).parent.rglob("test_*.py"))
    for name in hookspecs.__all__:
        if not name.startswith("portamem_"):
            continue
        fn = getattr(hookspecs, name)
        doc = inspect.getdoc(fn) or ""
        for param in inspect.signature(fn).parameters:
            assert f":param {param}:" in doc, f"{name} does not document {param}"
        assert ":return:" in doc or "register" in name, f"{name} does not document its result"
        assert name in tests or name.replace("portamem_", "") in tests, f"{name} has no test"


def _memory(tmp_path, embedder, pm) -> Memory:
    return Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm)


def test_unregistering_the_hybrid_scorer_drops_recency_and_importance(tmp_path, embedder) -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    with _memory(tmp_path, embedder, pm) as mem:
        mem.save_memory("Our anniversary dinner is at Chez Marie.", user_id="u")
        assert {"recency", "importance"} <= set(mem.search_memory("anniversary", user_id="u")[0].breakdown.components)
        pm.unregister(name="hybrid_scoring")
        components = mem.search_memory("anniversary", user_id="u")[0].breakdown.components
        assert "recency" not in components and "importance" not in components


def test_unregistering_the_extractor_leaves_records_unstructured(tmp_path, embedder) -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    pm.unregister(name="rule_extractor")
    with _memory(tmp_path, embedder, pm) as mem:
        rec = mem.save_memory("My name is Dana Whitfield and I live in Lyon.", user_id="u")
        assert rec.entities == [] and rec.triples == [] and rec.kind is None


class Exploding:
    @hookimpl
    def portamem_guard(self, record, context):  # noqa: ANN001, ANN201
        raise RuntimeError("boom")


class WrongShape:
    @hookimpl
    def portamem_score_importance(self, record, context):  # noqa: ANN001, ANN201
        return 250


@pytest.mark.parametrize("plugin,name", [(Exploding(), "exploding"), (WrongShape(), "wrong_shape")])
def test_a_failing_plugin_is_named_and_the_write_refused_whole(tmp_path, embedder, plugin, name) -> None:
    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(plugin, name=name)
    with _memory(tmp_path, embedder, pm) as mem:
        with pytest.raises(PluginError, match=name) as info:
            mem.save_memory("Keep the receipts for the tax return.", user_id="u")
        assert info.value.plugin == name
        assert mem.list_memories(user_id="u", filters={"statuses": ["active", "pending", "quarantined"]}) == []


def test_strictest_guard_verdict_wins() -> None:
    class Pending:
        @hookimpl
        def portamem_guard(self, record, context):  # noqa: ANN001, ANN201
            return GuardVerdict("pending", "needs a second source")

    class Quarantine:
        @hookimpl
        def portamem_guard(self, record, context):  # noqa: ANN001, ANN201
            return GuardVerdict("quarantine", "injection")

    pm = get_plugin_manager(load_entrypoints=False, defaults=False)
    pm.register(Pending(), name="p")
    pm.register(Quarantine(), name="q")
    from portamem.records import MemoryRecord

    verdict = Hooks(pm).guard(MemoryRecord(content="x", user_id="u"), None)  # type: ignore[arg-type]
    assert (verdict.action, verdict.guard) == ("quarantine", "q")


def test_duplicate_scorer_names_are_refused() -> None:
    class Again:
        @hookimpl
        def portamem_register_scorers(self, register):  # noqa: ANN001, ANN201
            register("recency", lambda *a: None)

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Again(), name="again")
    with pytest.raises(PluginError, match="already registered"):
        Hooks(pm).scorers()


def test_redaction_spans_resolve_longest_first_and_bad_spans_are_refused() -> None:
    from portamem.pipeline import Redaction

    class Spans:
        def __init__(self, spans):  # noqa: ANN001
            self.spans = spans

        @hookimpl
        def portamem_redact(self, text, context):  # noqa: ANN001, ANN201
            return self.spans

    pm = get_plugin_manager(load_entrypoints=False, defaults=False)
    pm.register(Spans([Redaction(8, 12, "pin")]), name="short")
    pm.register(Spans([Redaction(4, 20, "card", "[CARD]")]), name="long")
    text, kept = Hooks(pm).redact("pay 4111111111111111 now", None)  # type: ignore[arg-type]
    assert text == "pay [CARD] now" and [r.kind for r in kept] == ["card"]
    pm.register(Spans([Redaction(3, 99, "oops")]), name="bad")
    with pytest.raises(PluginError, match="bad"):
        Hooks(pm).redact("short text", None)  # type: ignore[arg-type]


def test_a_habit_summariser_plugin_writes_the_abstract_memory(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    from datetime import datetime, timedelta, timezone

    from portamem import hookimpl
    from portamem.lifecycle.abstraction import ABSTRACT_KEY

    seen = []

    class Summariser:
        @hookimpl
        def portamem_summarize_habit(self, habit, context):  # type: ignore[no-untyped-def]
            seen.append((habit.words, habit.support, habit.of, context.user_id))
            return f"Books window seats ({habit.support} of {habit.of})."

    pm = get_plugin_manager(load_entrypoints=False)
    pm.register(Summariser(), name="my_habits")
    t0 = datetime(2025, 3, 1, tzinfo=timezone.utc)
    seats = ["Booked seat 14A (window) on LH902 to Munich.", "Booked a window seat, 22F, on BA1440 to London.",
             "Flight to Paris booked: seat 9A, window.", "Booked seat 31C (aisle) on the Rome flight.",
             "Booked window seat 3A on the Vienna flight.", "Flight to Oslo booked, seat 17F by the window.",
             "Booked seat 12A, a window, on the Madrid flight."]
    other = ["I live in Leeds.", "My dentist is Dr Shah.", "I love jazz.", "My sister Jo has two kids.",
             "The car needs a service in May.", "I'm learning Spanish.", "My cat is called Miso.", "I work at a bank."]
    with _memory(tmp_path, embedder, pm) as mem:
        for i, text in enumerate(seats + other):
            mem.save_memory(text, user_id="u", source="tool" if text in seats else "user",
                            created_at=t0 + timedelta(days=3 * i))
        mem.flush()
        mem.maintain(now=t0 + timedelta(days=60))
        habits = [r for r in mem.list_memories(user_id="u") if ABSTRACT_KEY in r.metadata]
    assert len(habits) == 1 and seen and seen[0][3] == "u" and "window" in seen[0][0]
    assert habits[0].content == f"Books window seats ({seen[0][1]} of {seen[0][2]})."
