/**
 * `PortamemClient`: every operation of the portamem HTTP API (`portamem serve`) over `fetch`.
 *
 * Method names are those of Python's `Memory`/`RemoteMemory` in camelCase; arguments and answers use
 * the wire's field names (`user_id`, `top_k`, ...). A failure throws the `portamem.errors` class the
 * server named (see `errors.ts`). Answers 429 (write queue full) and 503 (store unavailable) are
 * retried with exponential backoff and jitter, never sooner than the answer's `Retry-After`; neither
 * answer means anything was written. Each attempt has a timeout, and every call takes an `AbortSignal`.
 */
import {
  PortamemError,
  StoreError,
  StoreUnreachableError,
  ValidationError,
  errorFromResponse,
} from "./errors.js";
import type {
  ArchiveRequest,
  AuditFinding,
  AuditRequest,
  ClearContextQuery,
  ContextQuery,
  Draft,
  Erasure,
  ExportQuery,
  Explanation,
  FlushRequest,
  HistoryEntry,
  ImportQuery,
  KeyQuery,
  KeyedListRequest,
  ListRequest,
  MaintainRequest,
  MaintenanceReport,
  MemoryQuery,
  MemoryRecord,
  PurgeRequest,
  RefreshRequest,
  SaveManyRequest,
  SaveRequest,
  SearchHit,
  SearchRequest,
  SessionRequest,
  SetTierRequest,
  Stats,
  StatsQuery,
  TierCounts,
  TierCountsQuery,
  TraceEntry,
  TracedSearch,
  Turn,
  TurnRequest,
  UpdateRequest,
  UserRequest,
  WhoAmI,
} from "./types.js";

/** Where a `PortamemClient` sends its requests and how it waits and retries. */
export interface ClientOptions {
  /** the server's base URL, e.g. `http://memory.internal:8765` */
  url: string;
  /** an API key from `portamem keys create` (default: `$PORTAMEM_API_KEY` where there is a process environment) */
  apiKey?: string;
  /** milliseconds one attempt may take until its answer is read (a streamed export: until it starts); default 120000 */
  timeoutMs?: number;
  /** retries after a 429 or 503 answer; default 4 */
  retries?: number;
  /** the first retry's backoff in milliseconds, doubled for each next one (with jitter); default 250 */
  retryBaseMs?: number;
  /** the longest wait before a retry; a `Retry-After` beyond it is not waited for (the error is thrown); default 30000 */
  maxRetryDelayMs?: number;
  /** a `fetch` to use instead of the global one */
  fetch?: typeof globalThis.fetch;
  /** headers added to every request */
  headers?: Record<string, string>;
  /** called before each retry, e.g. to log or count them */
  onRetry?: (event: RetryEvent) => void;
}

/** Per-call options: cancellation and overrides of the client's timeout and retries. */
export interface RequestOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  retries?: number;
}

/** A retry about to happen. */
export interface RetryEvent {
  method: string;
  path: string;
  /** 1 for the first retry */
  attempt: number;
  /** the answer's status (429 or 503) */
  status: number;
  error: PortamemError;
  /** how long the client waits before the retry, in milliseconds */
  delayMs: number;
}

/** A body `import` streams to the server: text, bytes, or chunks of them. */
export type ImportSource =
  | string
  | Uint8Array
  | Array<string | Uint8Array>
  | ReadableStream<Uint8Array>
  | AsyncIterable<string | Uint8Array>
  | Iterable<string | Uint8Array>;

interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, string | number | boolean | null | undefined>;
  json?: unknown;
  /** a raw body; a function is called once per attempt (a body that can be sent again) */
  body?: () => NonNullable<RequestInit["body"]>;
  /** a body that can be sent once only: never retried */
  once?: boolean;
  contentType?: string;
  stream?: boolean;
  /** the answer is text (`/metrics`), not JSON */
  text?: boolean;
}

const DEFAULTS = { timeoutMs: 120_000, retries: 4, retryBaseMs: 250, maxRetryDelayMs: 30_000 };

function envKey(): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.PORTAMEM_API_KEY || undefined;
}

function segment(memoryId: string): string {
  if (typeof memoryId !== "string" || !memoryId.trim()) throw new ValidationError("memory_id must be a non-empty string");
  return encodeURIComponent(memoryId);
}

/** A key namespace in its one-string form (labels joined by "."), as the server takes it. */
export function namespaceString(namespace: string | readonly string[] | undefined): string {
  if (namespace === undefined) return "";
  if (typeof namespace === "string") return namespace;
  if (!Array.isArray(namespace) || !namespace.every((x) => typeof x === "string")) {
    throw new ValidationError("a key namespace must be a string or a list of strings");
  }
  if (namespace.some((x) => !x || x.includes("."))) {
    throw new ValidationError(`namespace labels must be non-empty and must not contain '.': ${JSON.stringify(namespace)}`);
  }
  return namespace.join(".");
}

/** Milliseconds a `Retry-After` header asks for (seconds or an HTTP date); undefined without one. */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || !value.trim()) return undefined;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** Sleep `ms`, or reject with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const encoder = new TextEncoder();

function toBytes(chunk: string | Uint8Array): Uint8Array {
  return typeof chunk === "string" ? encoder.encode(chunk) : chunk;
}

function streamOf(source: AsyncIterable<string | Uint8Array> | Iterable<string | Uint8Array>): ReadableStream<Uint8Array> {
  const iterator =
    Symbol.asyncIterator in source
      ? (source as AsyncIterable<string | Uint8Array>)[Symbol.asyncIterator]()
      : (source as Iterable<string | Uint8Array>)[Symbol.iterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done) controller.close();
      else controller.enqueue(toBytes(next.value));
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}

function importBody(source: ImportSource): Pick<Call, "body" | "once"> {
  if (typeof source === "string" || source instanceof Uint8Array) return { body: () => source };
  if (Array.isArray(source)) return { body: () => streamOf(source) };
  if (source instanceof ReadableStream) return { body: () => source, once: true };
  if (typeof source === "object" && source !== null && (Symbol.asyncIterator in source || Symbol.iterator in source)) {
    return { body: () => streamOf(source), once: true };
  }
  throw new ValidationError("an import source must be a string, bytes, a ReadableStream or an iterable of chunks");
}

/** The client of one portamem server, acting with one API key (its tenant is the key's). */
export class PortamemClient {
  readonly url: string;
  private readonly apiKey: string | undefined;
  private readonly options: Required<Pick<ClientOptions, "timeoutMs" | "retries" | "retryBaseMs" | "maxRetryDelayMs">>;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly extraHeaders: Record<string, string>;
  private readonly onRetry: ((event: RetryEvent) => void) | undefined;

  constructor(options: ClientOptions) {
    if (!options || typeof options.url !== "string" || !/^https?:\/\//.test(options.url)) {
      throw new ValidationError("PortamemClient needs the server's http(s) url");
    }
    this.url = options.url.replace(/\/+$/, "");
    this.apiKey = options.apiKey ?? envKey();
    this.options = {
      timeoutMs: options.timeoutMs ?? DEFAULTS.timeoutMs,
      retries: options.retries ?? DEFAULTS.retries,
      retryBaseMs: options.retryBaseMs ?? DEFAULTS.retryBaseMs,
      maxRetryDelayMs: options.maxRetryDelayMs ?? DEFAULTS.maxRetryDelayMs,
    };
    this.fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.extraHeaders = { ...(options.headers ?? {}) };
    this.onRetry = options.onRetry;
  }

  // ------------------------------------------------------------------ transport
  private target(call: Call): string {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== null) params.set(name, String(value));
    }
    const query = params.toString();
    return `${this.url}${call.path}${query ? `?${query}` : ""}`;
  }

  private headers(call: Call): Record<string, string> {
    const headers: Record<string, string> = { Accept: call.text ? "text/plain" : "application/json", ...this.extraHeaders };
    if (this.apiKey) headers["Authorization"] = `Bearer ${this.apiKey}`;
    if (call.json !== undefined) headers["Content-Type"] = "application/json";
    else if (call.contentType) headers["Content-Type"] = call.contentType;
    return headers;
  }

  private backoff(attempt: number, retryAfterMs: number | undefined): number {
    const span = Math.min(this.options.retryBaseMs * 2 ** attempt, this.options.maxRetryDelayMs);
    const jittered = span / 2 + Math.random() * (span / 2);
    return Math.round(Math.max(jittered, retryAfterMs ?? 0));
  }

  /** One call, with its retries: the parsed JSON answer, or the `Response` of a stream. */
  private async send(call: Call, opts: RequestOptions = {}): Promise<unknown> {
    const retries = opts.retries ?? this.options.retries;
    const timeoutMs = opts.timeoutMs ?? this.options.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const outcome = await this.attempt(call, timeoutMs, opts.signal);
      if (!(outcome instanceof PortamemError)) return outcome;
      const error = outcome;
      const retriable = (error.status === 429 || error.status === 503) && !call.once;
      if (!retriable || attempt >= retries) throw error;
      const delayMs = this.backoff(attempt, error.retryAfterMs);
      if (delayMs > this.options.maxRetryDelayMs) throw error;
      this.onRetry?.({ method: call.method, path: call.path, attempt: attempt + 1, status: error.status!, error, delayMs });
      await sleep(delayMs, opts.signal);
    }
  }

  /** One attempt: the answer, or the server's error to retry or throw; a network failure or abort throws. */
  private async attempt(call: Call, timeoutMs: number, signal: AbortSignal | undefined): Promise<unknown> {
    if (signal?.aborted) throw signal.reason;
    const controller = new AbortController();
    const timedOut = new Error("timeout");
    const onAbort = () => controller.abort(signal!.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => controller.abort(timedOut), timeoutMs);
    const url = this.target(call);
    const failure = (exc: unknown): unknown => {
      if (signal?.aborted) return signal.reason;
      if (controller.signal.aborted && controller.signal.reason === timedOut) {
        return new StoreUnreachableError(`no answer from the portamem server at ${this.url} within ${timeoutMs} ms`, {
          url,
          cause: exc,
        });
      }
      if (exc instanceof PortamemError) return exc;
      const why = exc instanceof Error ? (exc.cause instanceof Error ? exc.cause.message : exc.message) : String(exc);
      return new StoreUnreachableError(`cannot reach the portamem server at ${this.url}: ${why}`, { url, cause: exc });
    };
    let keepLink = false;
    try {
      const init: RequestInit & { duplex?: "half" } = {
        method: call.method,
        headers: this.headers(call),
        signal: controller.signal,
      };
      if (call.json !== undefined) init.body = JSON.stringify(call.json);
      else if (call.body) {
        init.body = call.body();
        init.duplex = "half";
      }
      const response = await this.fetchImpl(url, init);
      if (response.ok && call.stream) {
        keepLink = true; // the caller's signal still cancels the body; the timeout covered the wait for it
        return response;
      }
      const text = await response.text();
      if (!response.ok) {
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* a body that is no JSON is reported as text */
        }
        return errorFromResponse(response.status, body, parseRetryAfter(response.headers.get("retry-after")));
      }
      if (call.text) return text;
      try {
        return text ? JSON.parse(text) : null;
      } catch {
        throw new StoreError(`the portamem server at ${this.url} answered ${call.method} ${call.path} with no JSON`);
      }
    } catch (exc) {
      throw failure(exc);
    } finally {
      clearTimeout(timer);
      if (!keepLink) signal?.removeEventListener("abort", onAbort);
    }
  }

  private async json<T>(call: Call, opts?: RequestOptions): Promise<T> {
    return (await this.send(call, opts)) as T;
  }

  // ------------------------------------------------------------------ service
  /** Liveness (needs no key). */
  async health(opts?: RequestOptions): Promise<{ status: string }> {
    return this.json({ method: "GET", path: "/v1/health" }, opts);
  }

  /** The key's id, tenant, users, agents and scopes. */
  async whoami(opts?: RequestOptions): Promise<WhoAmI> {
    return this.json({ method: "GET", path: "/v1/whoami" }, opts);
  }

  /**
   * The key's tenant's write-queue counters; with `all_tenants: true` (a key with the `admin` scope, else
   * `PermissionDeniedError`) also the whole server's in `server`: every tenant's queue and the indexer's lag.
   */
  async stats(query: StatsQuery = {}, opts?: RequestOptions): Promise<Stats> {
    return this.json({ method: "GET", path: "/v1/stats", query }, opts);
  }

  /** The server in the Prometheus text format (a key with the `admin` scope, else `PermissionDeniedError`). */
  async metrics(opts?: RequestOptions): Promise<string> {
    return this.json({ method: "GET", path: "/metrics", text: true }, opts);
  }

  /** Wait until vector search reflects every write committed before this call (`IndexingTimeoutError` after `timeout` s). */
  async flush(body: FlushRequest = {}, opts?: RequestOptions): Promise<void> {
    await this.send({ method: "POST", path: "/v1/flush", json: body }, opts);
  }

  // ------------------------------------------------------------------ write
  /** Save one memory; answered once it is committed (and indexed too, with `wait: true`). */
  async saveMemory(body: SaveRequest, opts?: RequestOptions): Promise<MemoryRecord> {
    return this.json({ method: "POST", path: "/v1/memories", json: body }, opts);
  }

  /** Save several memories of one user in one transaction, all or none. */
  async saveMemories(body: SaveManyRequest, opts?: RequestOptions): Promise<MemoryRecord[]> {
    if (!Array.isArray(body.memories)) throw new ValidationError("memories must be a list of drafts or strings");
    if (body.memories.length === 0) return [];
    const memories: Draft[] = body.memories.map((d) => (typeof d === "string" ? { content: d } : d));
    const out = await this.json<{ records: MemoryRecord[] }>(
      { method: "POST", path: "/v1/memories/batch", json: { ...body, memories } },
      opts,
    );
    return out.records;
  }

  // ------------------------------------------------------------------ read
  /** Hybrid search; each hit carries its score breakdown and the retrievers that found it (`found_by`). */
  async searchMemory(body: SearchRequest, opts?: RequestOptions): Promise<SearchHit[]> {
    return (await this.json<{ hits: SearchHit[] }>({ method: "POST", path: "/v1/search", json: body }, opts)).hits;
  }

  /**
   * A search with its candidate table (the server's `debug`; a key with the `debug` scope, else
   * `PermissionDeniedError`): the hits as `searchMemory` answers them, and for every candidate the
   * retrievers that found it, its component and final scores and its fate (kept, or why not).
   */
  async searchWithTrace(body: SearchRequest, opts?: RequestOptions): Promise<TracedSearch> {
    const out = await this.json<{ hits: SearchHit[]; trace?: TraceEntry[] }>(
      { method: "POST", path: "/v1/search", json: { ...body, debug: true } },
      opts,
    );
    return { hits: out.hits, trace: out.trace ?? [] };
  }

  /** One memory by id. */
  async getMemory(memoryId: string, query: MemoryQuery, opts?: RequestOptions): Promise<MemoryRecord> {
    return this.json({ method: "GET", path: `/v1/memories/${segment(memoryId)}`, query }, opts);
  }

  /** One user's memories in insertion order (active ones unless `filters.statuses` says otherwise). */
  async listMemories(body: ListRequest, opts?: RequestOptions): Promise<MemoryRecord[]> {
    const out = await this.json<{ records: MemoryRecord[] }>({ method: "POST", path: "/v1/memories/list", json: body }, opts);
    return out.records;
  }

  /** The audit trail of one memory. */
  async history(memoryId: string, query: MemoryQuery, opts?: RequestOptions): Promise<HistoryEntry[]> {
    const path = `/v1/memories/${segment(memoryId)}/history`;
    return (await this.json<{ history: HistoryEntry[] }>({ method: "GET", path, query }, opts)).history;
  }

  /** How and from which turn a memory was written, its trust and weight, and the searches that returned it. */
  async explain(memoryId: string, query: MemoryQuery, opts?: RequestOptions): Promise<Explanation> {
    return this.json({ method: "GET", path: `/v1/memories/${segment(memoryId)}/explain`, query }, opts);
  }

  // ------------------------------------------------------------------ change
  /** Soft-delete memories, all or none: they leave search at once. Returns their ids. */
  async forgetMemory(memoryIds: string | string[], body: { user_id: string }, opts?: RequestOptions): Promise<string[]> {
    const ids = typeof memoryIds === "string" ? [memoryIds] : memoryIds;
    if (!Array.isArray(ids)) throw new ValidationError("memory ids must be a string or a list of strings");
    if (ids.length === 0) return [];
    const json = { user_id: body.user_id, memory_ids: ids };
    return (await this.json<{ forgotten: string[] }>({ method: "POST", path: "/v1/memories/forget", json }, opts)).forgotten;
  }

  /** Undo a forget while the memory has not been purged. */
  async restoreMemory(memoryId: string, body: { user_id: string }, opts?: RequestOptions): Promise<MemoryRecord> {
    return this.json({ method: "POST", path: `/v1/memories/${segment(memoryId)}/restore`, json: body }, opts);
  }

  /** Reinforce a memory: importance += delta (default 0.1), counted as accessed now. */
  async refreshMemory(memoryId: string, body: RefreshRequest, opts?: RequestOptions): Promise<MemoryRecord> {
    return this.json({ method: "POST", path: `/v1/memories/${segment(memoryId)}/refresh`, json: body }, opts);
  }

  /** Activate a pending memory after review. */
  async confirmMemory(memoryId: string, body: { user_id: string }, opts?: RequestOptions): Promise<MemoryRecord> {
    return this.json({ method: "POST", path: `/v1/memories/${segment(memoryId)}/confirm`, json: body }, opts);
  }

  /** Rewrite a memory's content and/or metadata, keeping its id and history. */
  async updateMemory(memoryId: string, body: UpdateRequest, opts?: RequestOptions): Promise<MemoryRecord> {
    if (body.content == null && body.metadata == null) {
      throw new ValidationError("nothing to update: give content, metadata or both");
    }
    return this.json({ method: "PATCH", path: `/v1/memories/${segment(memoryId)}`, json: body }, opts);
  }

  /**
   * The sealed originals of a redacted memory (the server audits the reveal). They open only with the
   * vault's private key, which never reaches the server: `portamem reveal` or Python's `RemoteMemory` opens them.
   */
  async revealSealed(memoryId: string, body: { user_id: string }, opts?: RequestOptions): Promise<string> {
    const path = `/v1/memories/${segment(memoryId)}/reveal`;
    return (await this.json<{ sealed: string }>({ method: "POST", path, json: body }, opts)).sealed;
  }

  /**
   * Move memories to a storage tier ("hot", "warm" or "cold"), all or none, each move audited: a cold memory
   * comes back from the archive whole; a keyed memory never goes cold (`ValidationError`). Returns the ids that moved.
   */
  async setTier(memoryIds: string | string[], body: SetTierRequest, opts?: RequestOptions): Promise<string[]> {
    const ids = typeof memoryIds === "string" ? [memoryIds] : memoryIds;
    if (!Array.isArray(ids)) throw new ValidationError("memory ids must be a string or a list of strings");
    if (ids.length === 0) return [];
    const json = { user_id: body.user_id, memory_ids: ids, tier: body.tier };
    return (await this.json<{ moved: string[] }>({ method: "POST", path: "/v1/memories/tier", json }, opts)).moved;
  }

  /** Active memories in the hot and warm tiers and archived ones in the cold tier: one user's, or (a tenant-wide key) the tenant's. */
  async tierCounts(query: TierCountsQuery = {}, opts?: RequestOptions): Promise<TierCounts> {
    return (await this.json<{ tier_counts: TierCounts }>({ method: "GET", path: "/v1/tiers", query }, opts)).tier_counts;
  }

  // ------------------------------------------------------------------ keyed memories
  /** The memory stored under `(key_namespace, key)`, or `NotFoundError`. */
  async getByKey(query: KeyQuery, opts?: RequestOptions): Promise<MemoryRecord> {
    const q = { ...query, key_namespace: namespaceString(query.key_namespace) };
    return this.json({ method: "GET", path: "/v1/keyed", query: q }, opts);
  }

  /** Soft-delete the memory under a key; returns its id. */
  async forgetByKey(query: KeyQuery, opts?: RequestOptions): Promise<string> {
    const q = { ...query, key_namespace: namespaceString(query.key_namespace) };
    return (await this.json<{ forgotten: string }>({ method: "DELETE", path: "/v1/keyed", query: q }, opts)).forgotten;
  }

  /** One user's keyed memories in a namespace or below it, in write order. */
  async listKeyed(body: KeyedListRequest, opts?: RequestOptions): Promise<MemoryRecord[]> {
    const json = { ...body, key_namespace: namespaceString(body.key_namespace) };
    return (await this.json<{ records: MemoryRecord[] }>({ method: "POST", path: "/v1/keyed/list", json }, opts)).records;
  }

  /** The users of the key's tenant that hold memories (a tenant-wide key). */
  async userIds(opts?: RequestOptions): Promise<string[]> {
    return (await this.json<{ users: string[] }>({ method: "GET", path: "/v1/users" }, opts)).users;
  }

  /**
   * Erase everything of one user of the key's tenant now, with no grace period and no undo: every tier, the
   * indexes and caches, the working windows, logs and sealed originals; one audit row without content remains.
   * Needs a read-write key with the `admin` scope (`PermissionDeniedError` otherwise). Returns what went.
   */
  async eraseUser(body: UserRequest, opts?: RequestOptions): Promise<Erasure> {
    return this.json({ method: "POST", path: "/v1/users/erase", json: { user_id: body.user_id } }, opts);
  }

  // ------------------------------------------------------------------ working window
  /** Append a turn to the session's working window; returns the memories it wrote. */
  async addTurn(body: TurnRequest, opts?: RequestOptions): Promise<MemoryRecord[]> {
    return (await this.json<{ memories: MemoryRecord[] }>({ method: "POST", path: "/v1/turns", json: body }, opts)).memories;
  }

  /**
   * Take the newest turn out of the session's working window, without writing episodic memory (an undo of
   * the last exchange, as the OpenAI Agents SDK's `Session.pop_item` asks); null when the window is empty.
   */
  async popTurn(body: SessionRequest, opts?: RequestOptions): Promise<Turn | null> {
    return (await this.json<{ turn: Turn | null }>({ method: "POST", path: "/v1/turns/pop", json: body }, opts)).turn;
  }

  /** The turns in the session's working window, oldest first. */
  async context(query: ContextQuery, opts?: RequestOptions): Promise<Turn[]> {
    return (await this.json<{ turns: Turn[] }>({ method: "GET", path: "/v1/context", query }, opts)).turns;
  }

  /** Drop the working window (of one session, or every session of the user) without writing episodic memory. */
  async clearContext(query: ClearContextQuery, opts?: RequestOptions): Promise<void> {
    await this.send({ method: "DELETE", path: "/v1/context", query }, opts);
  }

  /** Compress messages that left a framework's own window into one episodic memory (null when nothing was kept). */
  async archiveMessages(body: ArchiveRequest, opts?: RequestOptions): Promise<MemoryRecord | null> {
    const path = "/v1/messages/archive";
    return (await this.json<{ memory: MemoryRecord | null }>({ method: "POST", path, json: body }, opts)).memory;
  }

  // ------------------------------------------------------------------ audit and maintenance
  /** Memories to review: weight that rose sharply, low-trust and pending ones (a user's, or with a tenant-wide key all). */
  async auditScan(body: AuditRequest = {}, opts?: RequestOptions): Promise<AuditFinding[]> {
    return (await this.json<{ findings: AuditFinding[] }>({ method: "POST", path: "/v1/audit", json: body }, opts)).findings;
  }

  /**
   * Evict decayed memories, purge those past the grace period, consolidate, and move memories between storage
   * tiers by age and use (`tiered`) (a tenant-wide key).
   */
  async maintain(body: MaintainRequest = {}, opts?: RequestOptions): Promise<MaintenanceReport> {
    return this.json({ method: "POST", path: "/v1/maintain", json: body }, opts);
  }

  /** Hard-delete the tenant's forgotten memories past the grace period (a tenant-wide key); returns how many. */
  async purgeDeleted(body: PurgeRequest = {}, opts?: RequestOptions): Promise<number> {
    return (await this.json<{ purged: number }>({ method: "POST", path: "/v1/purge", json: body }, opts)).purged;
  }

  /** Rebuild the server's vector index from its records (a tenant-wide key); returns the tenant's indexed count. */
  async reindex(opts?: RequestOptions): Promise<number> {
    return (await this.json<{ reindexed: number }>({ method: "POST", path: "/v1/reindex" }, opts)).reindexed;
  }

  // ------------------------------------------------------------------ export / import (streamed)
  /**
   * The export as the server streams it: portable JSON lines (a header, records, window turns, a trailer
   * with counts and a checksum). One user's, or with a tenant-wide key the whole tenant's.
   */
  async exportStream(query: ExportQuery = {}, opts?: RequestOptions): Promise<ReadableStream<Uint8Array>> {
    const response = (await this.send({ method: "GET", path: "/v1/export", query, stream: true }, opts)) as Response;
    if (!response.body) throw new StoreError("the export answer has no body");
    return response.body;
  }

  /**
   * The export's lines, each exactly as the server wrote it (write them out joined by "\n" and `import`
   * reads them back). Throws `StoreError` when the stream ends before its trailer line: the server failed midway.
   */
  async *exportLines(query: ExportQuery = {}, opts?: RequestOptions): AsyncGenerator<string, void, undefined> {
    const stream = await this.exportStream(query, opts);
    const decoder = new TextDecoder("utf-8", { fatal: true });
    let rest = "";
    let last = "";
    const reader = stream.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        rest += done ? decoder.decode() : decoder.decode(value, { stream: true });
        const lines = rest.split("\n");
        rest = done ? "" : lines.pop()!;
        for (const line of lines) {
          if (!line.trim()) continue;
          last = line;
          yield line;
        }
        if (done) break;
      }
    } catch (exc) {
      if (opts?.signal?.aborted) throw opts.signal.reason;
      if (exc instanceof PortamemError) throw exc;
      throw new StoreError(`the export from ${this.url} broke off: ${exc instanceof Error ? exc.message : String(exc)}`, {
        cause: exc,
      });
    } finally {
      reader.releaseLock();
    }
    if (!last.startsWith('{"trailer"')) {
      throw new StoreError(`the export from ${this.url} ended before its trailer line: the server failed while writing it`);
    }
  }

  /**
   * Stream an export to the server, which imports it into the key's tenant, all or nothing (a tenant-wide
   * read-write key); returns the number of memories imported. `trusted: true` keeps the file's source, trust
   * and status (a restore of the tenant's own backup). A stream or iterator is sent once, never retried.
   */
  async import(source: ImportSource, query: ImportQuery = {}, opts?: RequestOptions): Promise<number> {
    const call: Call = {
      method: "POST",
      path: "/v1/import",
      query,
      contentType: "application/x-ndjson",
      ...importBody(source),
    };
    return (await this.json<{ imported: number }>(call, opts)).imported;
  }
}

