"""A third-party reconciler on ``portamem_reconcile``: its decisions are applied through supersession
(history kept, audited with its name and reason) after the same checks as the built-in ones."""

from __future__ import annotations

from portamem import Memory, Settings, Status, hookimpl
from portamem.embedding.embedders import Embedder
from portamem.pipeline import Decision
from portamem.plugins import get_plugin_manager


class RetireSports:
    """Says a statement about bouldering replaces the memory about tennis it was shown."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl(tryfirst=True)
    def portamem_reconcile(self, statements, candidates, turn, context, model):  # type: ignore[no-untyped-def]
        self.calls += 1
        assert context.formation and model is None and "bouldering" in turn.user
        return [Decision(s.memory_id, "update", c.memory_id, "bouldering replaced tennis")
                for s in statements for c in candidates[s.memory_id] if "tennis" in c.content]


def test_a_reconciler_plugin_decides_and_its_decision_is_audited(tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    plugin = RetireSports()
    pm = get_plugin_manager()
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        tennis = mem.save_memory("I play tennis every Sunday.", user_id="u")
        mem.flush()
        pm.register(plugin, name="retire_sports")
        new = mem.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="u")[0]
        mem.flush()
        assert plugin.calls == 1
        old = mem.get_memory(tennis.memory_id, user_id="u")
        assert old.status is Status.SUPERSEDED and old.superseded_by == new.memory_id
        trail = [e for e in mem.store.audit_trail(mem.tenant_id, new.memory_id) if e["action"] == "form"]
        assert trail[0]["detail"]["by"] == "retire_sports" and trail[0]["detail"]["applied"]


class SaysItAgain:
    """Says every statement repeats every memory it was shown."""

    @hookimpl(tryfirst=True)
    def portamem_reconcile(self, statements, candidates, turn, context, model):  # type: ignore[no-untyped-def]
        return [Decision(s.memory_id, "noop", c.memory_id, "the same thing again")
                for s in statements for c in candidates[s.memory_id]]


def test_a_repeat_never_folds_a_memory_into_another_scope(tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    pm = get_plugin_manager()
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        private = mem.save_memory("I'm vegan and have been for years.", user_id="u", agent_id="sales")
        mem.flush()
        pm.register(SaysItAgain(), name="says_it_again")
        shared = mem.add_turn("I'm vegan, have been for years.", "Noted.", user_id="u")[0]
        mem.flush()
        # the shared statement stays for every agent; the private one stays sales's
        assert mem.get_memory(shared.memory_id, user_id="u").status is Status.ACTIVE
        assert mem.get_memory(private.memory_id, user_id="u").status is Status.ACTIVE
        trail = [e for e in mem.store.audit_trail(mem.tenant_id, shared.memory_id) if e["action"] == "form"]
        assert trail and not trail[0]["detail"]["applied"]


class EraseWhileDeciding:
    """Decides an update while the turn's user is erased (the queue row goes, as erase_user removes it)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem

    @hookimpl(tryfirst=True)
    def portamem_reconcile(self, statements, candidates, turn, context, model):  # type: ignore[no-untyped-def]
        from portamem.storage.schema import formation_t

        with self.mem.store.transaction() as conn:
            conn.execute(formation_t.delete())
        return [Decision(s.memory_id, "update", c.memory_id, "replaced")
                for s in statements for c in candidates[s.memory_id] if "tennis" in c.content]


def test_a_turn_that_left_the_queue_while_it_was_formed_changes_nothing(tmp_path, embedder: Embedder) -> None:  # type: ignore[no-untyped-def]
    pm = get_plugin_manager()
    with Memory(settings=Settings(path=str(tmp_path / "s")), embedder=embedder, plugins=pm) as mem:
        tennis = mem.save_memory("I play tennis every Sunday.", user_id="u", wait=True)
        pm.register(EraseWhileDeciding(mem), name="erase_while_deciding")
        mem.add_turn("These days I go bouldering on Sundays.", "Fun!", user_id="u")
        mem.flush()
        # the round was rolled back: the decision it made for a turn no longer queued did not apply
        assert mem.get_memory(tennis.memory_id, user_id="u").status is Status.ACTIVE
        assert tennis.memory_id in mem.index.ids()
