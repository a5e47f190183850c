/**
 * The error classes of `portamem.errors`, by the same names and in the same hierarchy.
 *
 * The server answers every failure with `{"error": {"type": "<class name>", "message": "..."}}`;
 * the client throws the class that body names (`PortamemError` for a name it does not know), so
 * `catch (e) { if (e instanceof NotFoundError) ... }` works as `except NotFoundError` does in Python.
 */

/** What the server said, beside the message: the HTTP status, the class name it sent and `Retry-After`. */
export interface ErrorDetails {
  /** HTTP status of the answer; absent for failures that never got one (unreachable server, timeout). */
  status?: number;
  /** the `type` of the server's error body, as sent (it may name a class this client does not know) */
  type?: string;
  /** `Retry-After` of the answer, in milliseconds */
  retryAfterMs?: number;
  cause?: unknown;
}

/** Base class of every error portamem raises on purpose. */
export class PortamemError extends Error {
  readonly status: number | undefined;
  /** the error type the server named (`PortamemError` when it named none) */
  readonly type: string;
  readonly retryAfterMs: number | undefined;

  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.status = details.status;
    this.type = details.type ?? new.target.name;
    this.retryAfterMs = details.retryAfterMs;
  }
}

/** An argument has the wrong type or value; nothing was written (HTTP 422). */
export class ValidationError extends PortamemError {}
/** Memory content exceeds the server's `max_content_chars`. */
export class ContentTooLongError extends ValidationError {}
/**
 * Content of a kind portamem does not keep as a memory (an image, raw bytes): a memory is text (plain,
 * Markdown, or JSON kept as its text). Nothing was written; store a description of the image instead.
 */
export class UnsupportedContentError extends ValidationError {}
/** A memory id (or key) does not exist for this tenant and user, or is outside the key's scope (HTTP 404). */
export class NotFoundError extends PortamemError {}
/** The record store or the vector index failed (HTTP 503). */
export class StoreError extends PortamemError {}
/** A store could not be opened. */
export class StoreOpenError extends StoreError {}
/** Another process holds the embedded vector index open. */
export class StoreLockedError extends StoreOpenError {}
/**
 * A server did not answer: raised by this client when the portamem server cannot be reached or gives
 * no answer within the timeout; `url` is the address tried.
 */
export class StoreUnreachableError extends StoreOpenError {
  readonly url: string | undefined;

  constructor(message: string, details: ErrorDetails & { url?: string } = {}) {
    super(message, details);
    this.url = details.url;
  }
}
/** A storage backend's driver is missing on the server. */
export class BackendNotInstalledError extends StoreOpenError {}
/**
 * The PostgreSQL database named for the vector index has no pgvector and it cannot be created there;
 * `url` is that database (password masked).
 */
export class VectorExtensionMissingError extends StoreOpenError {
  readonly url: string | undefined;

  constructor(message: string, details: ErrorDetails & { url?: string } = {}) {
    super(message, details);
    this.url = details.url;
  }
}
/** The vector index did not catch up in time (`flush` with a timeout); the records are stored. */
export class IndexingTimeoutError extends StoreError {}
/** The embedding model could not be loaded or failed to encode. */
export class EmbeddingError extends PortamemError {}
/** Vectors of one model would be compared with vectors of another (HTTP 409). */
export class EmbeddingModelMismatchError extends EmbeddingError {}
/** An export file is malformed; the import was rolled back whole. */
export class ImportFormatError extends ValidationError {}
/** A plugin raised or returned a value of the wrong shape. */
export class PluginError extends PortamemError {}
/** A framework is missing (on the server, or `@langchain/core` here). */
export class FrameworkNotInstalledError extends PortamemError {}
/** A setting has an invalid value. */
export class ConfigError extends PortamemError {}
/** A sealed original cannot be made or opened. */
export class VaultError extends PortamemError {}
/** The request carried no API key, an unknown one or a revoked one (HTTP 401). */
export class AuthenticationError extends PortamemError {}
/** The API key may not do this: a read-only key writing, a user or agent outside its scope (HTTP 403). */
export class PermissionDeniedError extends PortamemError {}
/** The server's write queue is full; retry after `retryAfterMs` (HTTP 429). */
export class OverloadedError extends StoreError {}
/**
 * The request body is larger than the server takes (HTTP 413; `Settings.server_max_body_bytes`, 4 MiB by
 * default, 512 MiB for an import): refused while it was read, before any of it was parsed. Nothing was written.
 */
export class PayloadTooLargeError extends ValidationError {}
/**
 * The server does not answer to the `Host` the request named (HTTP 421): a server on a loopback address
 * takes only loopback names and those given with `portamem serve --allowed-host` (the DNS-rebinding defence).
 */
export class HostNotAllowedError extends PermissionDeniedError {}
/** A language model call failed (`portamem.models`); the server fell back to its rules. */
export class ModelError extends PortamemError {}
/** A model call ran past its time limit; it is not retried. */
export class ModelTimeoutError extends ModelError {}
/** The model server could not be reached or answered with a server error after its retries. */
export class ModelUnavailableError extends ModelError {}
/** The model server refused the request or answered with something that is not a chat completion. */
export class ModelResponseError extends ModelError {}
/**
 * The model server refused the request (HTTP 4xx but 408 and 429: a wrong key, an unknown model, a bad
 * request): asking again will not help until a setting changes, so the server's rules took over at once.
 */
export class ModelRefusedError extends ModelResponseError {}

type ErrorClass = new (message: string, details?: ErrorDetails) => PortamemError;

/** Every class by the name the server sends, as `portamem.errors.__all__` lists them. */
export const ERROR_CLASSES: Readonly<Record<string, ErrorClass>> = Object.freeze({
  PortamemError,
  ValidationError,
  ContentTooLongError,
  UnsupportedContentError,
  NotFoundError,
  StoreError,
  StoreOpenError,
  StoreLockedError,
  StoreUnreachableError,
  BackendNotInstalledError,
  VectorExtensionMissingError,
  IndexingTimeoutError,
  EmbeddingError,
  EmbeddingModelMismatchError,
  ImportFormatError,
  PluginError,
  FrameworkNotInstalledError,
  ConfigError,
  VaultError,
  AuthenticationError,
  PermissionDeniedError,
  OverloadedError,
  PayloadTooLargeError,
  HostNotAllowedError,
  ModelError,
  ModelTimeoutError,
  ModelUnavailableError,
  ModelResponseError,
  ModelRefusedError,
});

/** The class of an answer without a readable error body (a proxy's page, say), by its status. */
function classOfStatus(status: number): ErrorClass {
  switch (status) {
    case 401:
      return AuthenticationError;
    case 403:
      return PermissionDeniedError;
    case 404:
      return NotFoundError;
    case 413:
      return PayloadTooLargeError;
    case 421:
      return HostNotAllowedError;
    case 400:
    case 422:
      return ValidationError;
    case 409:
      return EmbeddingModelMismatchError;
    case 429:
      return OverloadedError;
    default:
      return status >= 500 ? StoreError : PortamemError;
  }
}

/** The error a failed answer stands for: the class its body names, else one chosen by its status. */
export function errorFromResponse(status: number, body: unknown, retryAfterMs?: number): PortamemError {
  const detail = typeof body === "object" && body !== null ? (body as { error?: unknown }).error : undefined;
  if (typeof detail === "object" && detail !== null) {
    const { type, message } = detail as { type?: unknown; message?: unknown };
    const name = typeof type === "string" ? type : "PortamemError";
    const cls = Object.prototype.hasOwnProperty.call(ERROR_CLASSES, name) ? ERROR_CLASSES[name]! : PortamemError;
    return new cls(typeof message === "string" && message ? message : name, { status, type: name, retryAfterMs });
  }
  const text = typeof body === "string" ? body.slice(0, 300) : "";
  const cls = classOfStatus(status);
  return new cls(`server answered HTTP ${status} without an error body${text ? `: ${text}` : ""}`, {
    status,
    type: cls.name,
    retryAfterMs,
  });
}
