"""Sealed originals of redacted memories: HPKE (RFC 9180) to a public key, opened only with its private key.

The store only ever holds the public key's ciphertext, so neither the data files nor the process
that writes them can reveal an original: revealing needs the private key, which the caller brings
(never from the settings, never from the store's directory). Each sealed text is bound to its
tenant, user and memory id, so a ciphertext moved to another record does not open.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from ..errors import FrameworkNotInstalledError, VaultError

__all__ = ["Vault", "generate_keypair", "open_sealed", "load_private_key", "write_private_key", "TOKEN_PREFIX",
           "PRIVATE_KEY_ENV"]

#: marks the format of a sealed value; a new suite gets a new prefix
TOKEN_PREFIX = "pmv1."
#: where ``load_private_key`` looks when it is given neither a key nor a file
PRIVATE_KEY_ENV = "PORTAMEM_VAULT_PRIVATE_KEY"


def _hpke() -> Any:
    try:
        from cryptography.hazmat.primitives import hpke
        from cryptography.hazmat.primitives.asymmetric import x25519
    except ImportError as exc:  # cryptography < 47 has no HPKE
        raise FrameworkNotInstalledError("cryptography>=47 (HPKE)", "vault") from exc
    return hpke, x25519


def _suite() -> Any:
    hpke, _ = _hpke()
    return hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)


def _b64decode(value: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(value.strip() + "=" * (-len(value.strip()) % 4))
    except (ValueError, TypeError) as exc:
        raise VaultError(f"the {what} is not base64: {exc}") from exc


def _context(tenant_id: str, user_id: str, memory_id: str) -> bytes:
    return "\x1f".join(("portamem-vault-v1", tenant_id, user_id, memory_id)).encode("utf-8")


def generate_keypair() -> tuple[str, str]:
    """A fresh (public, private) X25519 key pair, each as base64. Keep the private key off the server."""
    _, x25519 = _hpke()
    from cryptography.hazmat.primitives import serialization as ser

    private = x25519.X25519PrivateKey.generate()
    raw_private = private.private_bytes(ser.Encoding.Raw, ser.PrivateFormat.Raw, ser.NoEncryption())
    raw_public = private.public_key().public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)
    return base64.urlsafe_b64encode(raw_public).decode(), base64.urlsafe_b64encode(raw_private).decode()


class Vault:
    """Seals originals to one public key (``Settings.pii_vault_public_key``)."""

    def __init__(self, public_key: str) -> None:
        _, x25519 = _hpke()
        raw = _b64decode(public_key, "vault public key")
        if len(raw) != 32:
            raise VaultError(f"the vault public key must be 32 bytes (X25519), got {len(raw)}")
        self._public = x25519.X25519PublicKey.from_public_bytes(raw)
        self._suite = _suite()

    def seal(self, original: dict[str, Any], *, tenant_id: str, user_id: str, memory_id: str) -> str:
        """Encrypt a JSON-serialisable value for this record; returns a ``pmv1.`` token."""
        plaintext = json.dumps(original, ensure_ascii=False).encode("utf-8")
        ciphertext = self._suite.encrypt(plaintext, self._public, info=_context(tenant_id, user_id, memory_id))
        return TOKEN_PREFIX + base64.urlsafe_b64encode(ciphertext).decode()


def _outside_store(path: Path, store_path: str | Path | None) -> Path:
    path = path.resolve()
    if store_path is not None and Path(store_path).resolve() in path.parents:
        raise VaultError(f"the vault private key {path} lies inside the store directory; keep it elsewhere")
    return path


def write_private_key(path: str | Path, private_key: str, *, store_path: str | Path | None = None) -> None:
    """Write a private key readable by its owner only; never inside the store's directory."""
    target = _outside_store(Path(path), store_path)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise VaultError(f"cannot create {target} (it must not exist yet): {exc}") from exc
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(private_key + "\n")


def load_private_key(key: str | bytes | None = None, *, key_file: str | Path | None = None,
                     store_path: str | Path | None = None) -> str:
    """The private key as base64: given, read from ``key_file``, or from ``$PORTAMEM_VAULT_PRIVATE_KEY``.

    A key file inside the store's directory is refused: a key kept beside the data protects nothing.
    """
    if isinstance(key, bytes):
        return base64.urlsafe_b64encode(key).decode() if len(key) == 32 else key.decode("ascii").strip()
    if key:
        return key.strip()
    if key_file is not None:
        path = _outside_store(Path(key_file), store_path)
        try:
            return path.read_text(encoding="ascii").strip()
        except OSError as exc:
            raise VaultError(f"cannot read the vault private key {path}: {exc}") from exc
    env = os.environ.get(PRIVATE_KEY_ENV)
    if env:
        return env.strip()
    raise VaultError(f"revealing needs the vault private key: pass it, a key file, or set ${PRIVATE_KEY_ENV}")


def open_sealed(token: str, private_key: str, *, tenant_id: str, user_id: str, memory_id: str) -> dict[str, Any]:
    """Decrypt a token sealed by ``Vault.seal`` for this record; a wrong key or record raises VaultError."""
    _, x25519 = _hpke()
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        raise VaultError("not a sealed portamem value (expected a 'pmv1.' token)")
    raw = _b64decode(private_key, "vault private key")
    if len(raw) != 32:
        raise VaultError(f"the vault private key must be 32 bytes (X25519), got {len(raw)}")
    try:
        plaintext = _suite().decrypt(
            _b64decode(token[len(TOKEN_PREFIX):], "sealed value"),
            x25519.X25519PrivateKey.from_private_bytes(raw),
            info=_context(tenant_id, user_id, memory_id),
        )
    except VaultError:
        raise
    except Exception as exc:  # cryptography raises InvalidTag (and others) without a common base
        raise VaultError("the sealed original does not open with this key for this memory") from exc
    result = json.loads(plaintext.decode("utf-8"))
    if not isinstance(result, dict):
        raise VaultError("the sealed original is not a JSON object")
    return result
