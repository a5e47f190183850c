"""Typed errors: every failure portamem reports to a caller is one of these."""

from __future__ import annotations

__all__ = [
    "PortamemError",
    "ValidationError",
    "ContentTooLongError",
    "UnsupportedContentError",
    "NotFoundError",
    "StoreError",
    "StoreOpenError",
    "StoreLockedError",
    "StoreUnreachableError",
    "BackendNotInstalledError",
    "VectorExtensionMissingError",
    "IndexingTimeoutError",
    "EmbeddingError",
    "EmbeddingModelMismatchError",
    "ImportFormatError",
    "PluginError",
    "FrameworkNotInstalledError",
    "ConfigError",
    "VaultError",
    "AuthenticationError",
    "PermissionDeniedError",
    "OverloadedError",
    "PayloadTooLargeError",
    "HostNotAllowedError",
    "ModelError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "ModelResponseError",
    "ModelRefusedError",
]


class PortamemError(Exception):
    """Base class of every error portamem raises on purpose."""


class ValidationError(PortamemError, ValueError):
    """An argument has the wrong type or value; nothing was written."""


class ContentTooLongError(ValidationError):
    """Memory content exceeds ``Settings.max_content_chars``."""


class UnsupportedContentError(ValidationError):
    """Content of a kind portamem does not keep as a memory (an image, raw bytes); ``mime_type`` names it.
    A memory is text (plain, Markdown, or JSON kept as its text); store a description of the image instead."""

    def __init__(self, message: str, mime_type: str) -> None:
        super().__init__(message)
        self.mime_type = mime_type


class NotFoundError(PortamemError, KeyError):
    """A memory id does not exist for this tenant and user."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else "not found"


class StoreError(PortamemError):
    """The record store or the vector index failed."""


class StoreOpenError(StoreError):
    """A store could not be opened (bad path, URL, permissions or corrupt files)."""


class StoreLockedError(StoreOpenError):
    """Another process holds the embedded vector index open."""


class StoreUnreachableError(StoreOpenError):
    """A database or vector server did not answer; ``url`` is the address tried (password masked)."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.url = url


class BackendNotInstalledError(StoreOpenError, ImportError):
    """A storage backend's driver is missing; the message names the extra to install."""

    def __init__(self, message: str, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class VectorExtensionMissingError(StoreOpenError):
    """The PostgreSQL database named for the vector index has no pgvector and it cannot be created there;
    ``url`` is the database (password masked). Install pgvector on that server, or use a Milvus index."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.url = url


class IndexingTimeoutError(StoreError):
    """The vector index did not catch up in time (``wait=True``, ``Memory.flush``); the records are stored."""


class EmbeddingError(PortamemError):
    """The embedding model could not be loaded or failed to encode."""


class EmbeddingModelMismatchError(EmbeddingError):
    """Vectors of one model would be compared with vectors of another."""


class ImportFormatError(ValidationError):
    """An export file is malformed; the import was rolled back whole."""


class PluginError(PortamemError):
    """A plugin raised or returned a value of the wrong shape."""

    def __init__(self, plugin: str, hook: str, message: str) -> None:
        super().__init__(f"plugin {plugin!r} failed in {hook}: {message}")
        self.plugin = plugin
        self.hook = hook


class FrameworkNotInstalledError(PortamemError, ImportError):
    """An adapter's framework is missing; the message names the extra to install."""

    def __init__(self, framework: str, extra: str) -> None:
        super().__init__(
            f"{framework} is not installed; install it with: pip install 'portamem[{extra}]'"
        )
        self.framework = framework
        self.extra = extra


class ConfigError(PortamemError, ValueError):
    """A setting has an invalid value or a config file cannot be read."""


class VaultError(PortamemError):
    """A sealed original cannot be made or opened: no key, a malformed key, or the wrong key."""


class AuthenticationError(PortamemError):
    """A server request carried no API key, an unknown one or a revoked one."""


class PermissionDeniedError(PortamemError):
    """The API key may not do this: a read-only key writing, or a user or agent outside its scope."""


class PayloadTooLargeError(ValidationError):
    """A server request's body is larger than the server takes (HTTP 413, ``Settings.server_max_body_bytes``);
    it was refused while being read, before any of it was parsed."""


class HostNotAllowedError(PermissionDeniedError):
    """A server request named a ``Host`` outside the server's allow-list (HTTP 421): the DNS-rebinding
    defence of a loopback server (``Settings.server_allowed_hosts``, ``portamem serve --allowed-host``)."""


class OverloadedError(StoreError):
    """The server's write queue is full; retry after a short pause (HTTP 429, ``Retry-After``)."""


class ModelError(PortamemError):
    """A language model call failed (``portamem.models``); callers fall back to the rules."""


class ModelTimeoutError(ModelError, TimeoutError):
    """A model call ran past its time limit; it is not retried (a retry would cost the same time again)."""


class ModelUnavailableError(ModelError):
    """The model server could not be reached or answered with a server error (HTTP 5xx) after its retries."""


class ModelResponseError(ModelError):
    """The model server refused the request (HTTP 4xx) or answered with something that is not a chat completion."""


class ModelRefusedError(ModelResponseError):
    """The model server refused the request (HTTP 4xx but 408 and 429: a wrong key, an unknown model, a bad
    request): asking again will not help until a setting changes, so the caller's rules take over at once."""
