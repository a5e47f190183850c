"""Sealed originals: redacted memories can be revealed with the private key, and only with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("cryptography.hazmat.primitives.hpke")

from portamem import Memory, Settings  # noqa: E402
from portamem.cli import main  # noqa: E402
from portamem.errors import VaultError  # noqa: E402
from portamem.write.privacy import VAULT_KEY  # noqa: E402
from portamem.storage.vault import PRIVATE_KEY_ENV, Vault, generate_keypair, open_sealed  # noqa: E402

ID = "11010519491231002X"


@pytest.fixture
def keys() -> tuple[str, str]:
    return generate_keypair()


@pytest.fixture
def vaulted(tmp_path: Path, embedder, keys: tuple[str, str]):  # type: ignore[no-untyped-def]
    mem = Memory(settings=Settings(path=str(tmp_path / "store"), pii_vault_public_key=keys[0]), embedder=embedder)
    yield mem
    mem.close()


def test_reveal_returns_the_original_with_the_private_key(vaulted: Memory, keys: tuple[str, str]) -> None:
    rec = vaulted.save_memory(f"我的身份证号是{ID}，电话13812345678", user_id="u1")
    assert rec.content == "我的身份证号是[CN_ID]，电话[PHONE]"
    assert rec.metadata[VAULT_KEY].startswith("pmv1.") and ID not in json.dumps(rec.metadata)
    original = vaulted.reveal_memory(rec.memory_id, user_id="u1", private_key=keys[1])
    assert original["content"] == f"我的身份证号是{ID}，电话13812345678"
    assert vaulted.history(rec.memory_id, user_id="u1")[-1]["action"] == "reveal"


def test_reveal_needs_the_right_key(vaulted: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    rec = vaulted.save_memory(f"ID {ID}", user_id="u1")
    monkeypatch.delenv(PRIVATE_KEY_ENV, raising=False)
    with pytest.raises(VaultError, match="needs the vault private key"):
        vaulted.reveal_memory(rec.memory_id, user_id="u1")
    with pytest.raises(VaultError, match="does not open"):
        vaulted.reveal_memory(rec.memory_id, user_id="u1", private_key=generate_keypair()[1])
    with pytest.raises(VaultError, match="32 bytes"):
        vaulted.reveal_memory(rec.memory_id, user_id="u1", private_key="c2hvcnQ=")


def test_a_sealed_original_does_not_open_on_another_record(keys: tuple[str, str]) -> None:
    token = Vault(keys[0]).seal({"content": ID}, tenant_id="t", user_id="u1", memory_id="m1")
    assert open_sealed(token, keys[1], tenant_id="t", user_id="u1", memory_id="m1") == {"content": ID}
    for other in ({"user_id": "u2", "memory_id": "m1"}, {"user_id": "u1", "memory_id": "m2"}):
        with pytest.raises(VaultError):
            open_sealed(token, keys[1], tenant_id="t", **other)


def test_key_file_inside_the_store_is_refused(vaulted: Memory, keys: tuple[str, str]) -> None:
    rec = vaulted.save_memory(f"ID {ID}", user_id="u1")
    inside = Path(vaulted.settings.path) / "vault.key"
    inside.write_text(keys[1])
    with pytest.raises(VaultError, match="inside the store directory"):
        vaulted.reveal_memory(rec.memory_id, user_id="u1", key_file=inside)


def test_nothing_to_reveal_without_redaction_or_without_a_vault(vaulted: Memory, memory: Memory,
                                                                 keys: tuple[str, str]) -> None:
    plain = vaulted.save_memory("Nothing personal here.", user_id="u1")
    with pytest.raises(VaultError, match="no sealed original"):
        vaulted.reveal_memory(plain.memory_id, user_id="u1", private_key=keys[1])
    unsealed = memory.save_memory(f"ID {ID}", user_id="u1")  # no public key configured
    assert unsealed.content == "ID [CN_ID]" and VAULT_KEY not in unsealed.metadata


def test_keygen_and_reveal_from_the_command_line(tmp_path: Path, embedder, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    key_file = tmp_path / "keys" / "vault.key"
    key_file.parent.mkdir()
    assert main(["--path", str(tmp_path / "store"), "vault-keygen", "--private-key-file", str(key_file)]) == 0
    public = capsys.readouterr().out.strip().split("=", 1)[1]
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    settings = Settings(path=str(tmp_path / "store"), pii_vault_public_key=public)
    with Memory(settings=settings, embedder=embedder) as mem:
        rec = mem.save_memory("card 4111 1111 1111 1111", user_id="u1")
    monkeypatch.setenv("PORTAMEM_PII_VAULT_PUBLIC_KEY", public)
    monkeypatch.setattr("portamem.cli.connect.Memory", lambda settings, **kw: Memory(settings=settings, embedder=embedder))
    assert main(["--path", str(tmp_path / "store"), "reveal", rec.memory_id, "--user", "u1",
                 "--key-file", str(key_file)]) == 0
    assert json.loads(capsys.readouterr().out)["content"] == "card 4111 1111 1111 1111"


def test_bad_public_key_is_a_vault_error(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(VaultError):
        Memory(settings=Settings(path=str(tmp_path / "s"), pii_vault_public_key="bm90IGEga2V5"), embedder=embedder)
