"""What ``Memory`` does beyond the four operations, over the API: reindex, purge, reveal (audited), trusted import."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

pytest.importorskip("cryptography.hazmat.primitives.hpke")

from portamem import RemoteMemory  # noqa: E402
from portamem.errors import NotFoundError, PermissionDeniedError, VaultError  # noqa: E402
from portamem.storage.vault import generate_keypair  # noqa: E402
from portamem_conformance.remote import ServerProcess  # noqa: E402

ID = "11010519491231002X"


@pytest.fixture(scope="module")
def vault_keys() -> tuple[str, str]:
    return generate_keypair()


@pytest.fixture(scope="module")
def vaulted(tmp_path_factory: pytest.TempPathFactory, vault_keys: tuple[str, str]) -> Iterator[ServerProcess]:
    """A server whose store seals the originals of what it redacts (it holds the public key only)."""
    proc = ServerProcess(tmp_path_factory.mktemp("vaulted") / "store",
                         env={"PORTAMEM_PII_VAULT_PUBLIC_KEY": vault_keys[0]})
    yield proc
    proc.stop()


@pytest.fixture
def client(vaulted: ServerProcess) -> Iterator[Callable[..., RemoteMemory]]:
    opened: list[RemoteMemory] = []

    def make(tenant: str, **scope: object) -> RemoteMemory:
        opened.append(RemoteMemory(vaulted.url, vaulted.key(tenant, **scope)))  # type: ignore[arg-type]
        return opened[-1]

    yield make
    for mem in opened:
        mem.close()


def test_reveal_opens_the_original_on_the_client_and_is_audited(
        client: Callable[..., RemoteMemory], vault_keys: tuple[str, str], tmp_path: Path) -> None:
    mem = client("reveal")
    rec = mem.save_memory(f"我的身份证号是{ID}，电话13812345678", user_id="u1")
    assert rec.content == "我的身份证号是[CN_ID]，电话[PHONE]"
    original = mem.reveal_memory(rec.memory_id, user_id="u1", private_key=vault_keys[1])
    assert original["content"] == f"我的身份证号是{ID}，电话13812345678"
    last = mem.history(rec.memory_id, user_id="u1")[-1]
    assert last["action"] == "reveal" and last["actor"] == mem.key_id
    key_file = tmp_path / "vault.key"
    key_file.write_text(vault_keys[1], encoding="ascii")
    assert mem.reveal_memory(rec.memory_id, user_id="u1", key_file=key_file)["content"] == original["content"]
    with pytest.raises(VaultError):  # the wrong key opens nothing
        mem.reveal_memory(rec.memory_id, user_id="u1", private_key=generate_keypair()[1])
    plain = mem.save_memory("Nothing personal here.", user_id="u1")
    with pytest.raises(VaultError):
        mem.reveal_memory(plain.memory_id, user_id="u1", private_key=vault_keys[1])
    # another user's scope, or another tenant, sees a missing memory
    with pytest.raises(NotFoundError):
        client("reveal", users=["u2"]).reveal_memory(rec.memory_id, user_id="u2", private_key=vault_keys[1])
    with pytest.raises(NotFoundError):
        client("other").reveal_memory(rec.memory_id, user_id="u1", private_key=vault_keys[1])


def test_reveal_never_sends_the_private_key(vaulted: ServerProcess, vault_keys: tuple[str, str]) -> None:
    key = vaulted.key("wire")
    with RemoteMemory(vaulted.url, key) as mem:
        rec = mem.save_memory(f"ID {ID}", user_id="u")
    r = httpx.post(f"{vaulted.url}/v1/memories/{rec.memory_id}/reveal", json={"user_id": "u"},
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200 and r.json()["sealed"].startswith("pmv1.")
    assert ID not in r.text
    r = httpx.post(f"{vaulted.url}/v1/memories/{rec.memory_id}/reveal",
                   json={"user_id": "u", "private_key": vault_keys[1]},
                   headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 422  # the body takes no key


def test_purge_and_reindex_need_a_tenant_wide_key(client: Callable[..., RemoteMemory]) -> None:
    mem = client("purge")
    keep = mem.save_memory("The office moves to Lyon in May.", user_id="u")
    gone = mem.save_memory("The old office code was 1234.", user_id="u")
    mem.forget_memory(gone.memory_id, user_id="u")
    assert mem.purge_deleted() == 0  # within the grace period
    assert mem.purge_deleted(older_than=timedelta(0)) == 1
    with pytest.raises(NotFoundError):
        mem.get_memory(gone.memory_id, user_id="u")
    mem.get_memory(keep.memory_id, user_id="u")
    other = client("purge-other")
    other.save_memory("Another tenant's memory.", user_id="u")
    assert mem.reindex() == 1  # the tenant's own count, whatever the store holds
    mem.flush()
    assert [h.memory_id for h in mem.search_memory("Where does the office move?", user_id="u")] == [keep.memory_id]
    scoped = client("purge", users=["u"])
    with pytest.raises(PermissionDeniedError):
        scoped.purge_deleted(older_than=timedelta(0))
    with pytest.raises(PermissionDeniedError):
        scoped.reindex()
    with pytest.raises(PermissionDeniedError):
        client("purge", read_only=True).reindex()


def test_a_trusted_import_keeps_the_files_source_and_trust(client: Callable[..., RemoteMemory]) -> None:
    src = client("trust-src")
    src.save_memory("The deploy window is Tuesday 10:00.", user_id="u", source="tool", trust="high")
    buf = io.StringIO()
    assert src.export(buf, include_embeddings=False) == 1
    plain, trusted = client("trust-plain"), client("trust-restore")
    assert plain.import_(io.StringIO(buf.getvalue())) == 1
    assert trusted.import_(io.StringIO(buf.getvalue()), trusted=True) == 1
    [a] = plain.list_memories(user_id="u", filters={"statuses": ["active", "pending"]})
    [b] = trusted.list_memories(user_id="u")
    assert (a.source.value, a.trust.value) == ("user", "medium")
    assert (b.source.value, b.trust.value) == ("tool", "high")
