/**
 * Request and answer types of the HTTP API.
 *
 * Requests come from the server's OpenAPI schema (`openapi.json`, turned into `generated/openapi.ts`
 * by `npm run gen:types`), so a change of a request model shows in review and breaks the build
 * where this client no longer fits it. The schema declares no answer bodies (every route returns a
 * plain JSON object), so the answers are written out here, after `portamem.wire` and
 * `MemoryRecord.to_dict`. Field names are the wire's (snake_case), as in Python.
 */
import type { components, operations } from "./generated/openapi.js";

type Schemas = components["schemas"];
type Query<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;

export type MemoryType = Schemas["MemoryType"];
export type Source = Schemas["Source"];
export type Trust = Schemas["Trust"];
export type Status = "active" | "pending" | "quarantined" | "deleted" | "superseded";
/** Where a memory lives: hot (vector index), warm (keyword and entity indexes, searched when the hot evidence is thin), cold (the archive, searched only when named). */
export type Tier = Schemas["Tier"];

// ---------------------------------------------------------------------- requests (from the schema)
/** One memory to save: the fields of `Memory.save_memory`. */
export type Draft = Schemas["Draft"];
export type SaveRequest = Schemas["SaveRequest"];
/** Several memories of one user, saved all or none; a plain string is a draft with only `content`. */
export type SaveManyRequest = Omit<Schemas["BatchSaveRequest"], "memories"> & { memories: Array<Draft | string> };
/** A search (`searchMemory`; `searchWithTrace` sends the schema's `debug` field itself). */
export type SearchRequest = Omit<Schemas["SearchRequest"], "filters" | "debug"> & { filters?: SearchFilters | null };
export type ListRequest = Omit<Schemas["ListRequest"], "filters"> & { filters?: SearchFilters | null };
export type KeyedListRequest = Omit<Schemas["KeyedListRequest"], "filters"> & { filters?: SearchFilters | null };
export type UserRequest = Schemas["UserRequest"];
export type RefreshRequest = Schemas["RefreshRequest"];
export type UpdateRequest = Schemas["UpdateRequest"];
export type TurnRequest = Schemas["TurnRequest"];
/** One session of one user (`popTurn`). */
export type SessionRequest = Schemas["SessionRequest"];
export type ArchiveRequest = Omit<Schemas["ArchiveRequest"], "messages"> & { messages: NeutralMessage[] };
export type AuditRequest = Schemas["AuditRequest"];
export type MaintainRequest = Schemas["MaintainRequest"];
export type PurgeRequest = Schemas["PurgeRequest"];
export type FlushRequest = Schemas["FlushRequest"];
/** The user and the tier to move memories to (`setTier`; the ids are its first argument). */
export type SetTierRequest = Omit<Schemas["TierRequest"], "memory_ids">;
/** `user_id` of a route that names one memory (`GET /v1/memories/{id}` and the like). */
export type MemoryQuery = Query<"get_v1_memories__memory_id__get">;
export type ContextQuery = Query<"context_v1_context_get">;
export type ClearContextQuery = Query<"clear_context_v1_context_delete">;
/** A keyed memory's address; the namespace is its labels, as a list or joined by ".". */
export type KeyQuery = Omit<Query<"get_by_key_v1_keyed_get">, "key_namespace"> & { key_namespace?: string | string[] };
export type ExportQuery = Query<"export_v1_export_get">;
export type ImportQuery = Query<"import__v1_import_post">;
/** `all_tenants: true` (a key with the `admin` scope): the whole server's statistics beside the tenant's. */
export type StatsQuery = Query<"stats_v1_stats_get">;
/** One user's tier counts; without `user_id` (a tenant-wide key) the whole tenant's. */
export type TierCountsQuery = Query<"tier_counts_v1_tiers_get">;

/** Restrictions applied before ranking (`portamem.SearchFilters`); unknown keys are refused by the server. */
export interface SearchFilters {
  types?: MemoryType[] | null;
  statuses?: Status[] | null;
  sources?: Source[] | null;
  trusts?: Trust[] | null;
  session_id?: string | null;
  /** an agent's scope: its own private memories plus the shared layer (memories without an agent) */
  agent_id?: string | null;
  created_after?: string | null;
  created_before?: string | null;
  min_importance?: number | null;
  /** storage tiers to search or list (default: hot and warm; the cold tier only when named) */
  tiers?: Tier[] | null;
  /**
   * conditions on `metadata`, all of which must hold, applied before ranking:
   * `{ project: "apollo", priority: { $gte: 2 }, "owner.team": { $in: ["core", "infra"] } }`
   */
  metadata?: MetadataFilter | null;
}

/** A value a metadata condition compares with: numbers match numbers only, strings strings only. */
export type MetadataScalar = string | number | boolean | null;
/** The operators of one metadata key (several under one key all apply). */
export interface MetadataOperators {
  $eq?: MetadataScalar;
  $ne?: MetadataScalar;
  $in?: MetadataScalar[];
  $nin?: MetadataScalar[];
  $gt?: number | string;
  $gte?: number | string;
  $lt?: number | string;
  $lte?: number | string;
  $exists?: boolean;
}
/** Metadata key (dotted for a nested field, at most 6 levels) to a value (`$eq`) or operators. */
export type MetadataFilter = Record<string, MetadataScalar | MetadataOperators>;

// ---------------------------------------------------------------------- answers
/** One memory (`MemoryRecord.to_dict`); times are ISO 8601 strings in UTC. */
export interface MemoryRecord {
  content: string;
  user_id: string;
  tenant_id: string;
  memory_id: string;
  session_id: string | null;
  agent_id: string | null;
  type: MemoryType;
  kind: string | null;
  summary: string | null;
  entities: string[];
  triples: string[][];
  embedding: number[] | null;
  embedding_model: string | null;
  embedding_version: string | null;
  importance: number;
  importance_band: number;
  half_life_days: number;
  created_at: string;
  updated_at: string;
  last_accessed_at: string | null;
  access_count: number;
  frequency: number;
  source: Source;
  trust: Trust;
  status: Status;
  supersedes: string | null;
  superseded_by: string | null;
  deleted_at: string | null;
  metadata: Record<string, unknown>;
  key_namespace: string | null;
  key: string | null;
  /** its storage tier, and when it last moved there (null: hot since it was written) */
  tier: Tier;
  tiered_at: string | null;
}

/** Component scores (each 0..1), the weights they counted with, and the final score. */
export interface ScoreBreakdown {
  final: number;
  components: Record<string, number>;
  weights: Record<string, number>;
}

/** A recalled memory with its score breakdown and the retrievers that found it. */
export interface SearchHit {
  record: MemoryRecord;
  score: number;
  breakdown: ScoreBreakdown;
  /** which retrievers returned it: "vector", "keyword", "entity" */
  found_by: string[];
  /** ids of hits that contradict this one, the newer first */
  conflicts_with: string[];
}

/**
 * What ranking did with one candidate of a search (`portamem.read.trace.TraceEntry`, as
 * `portamem.wire.dump_trace` sends it): its sources, scores and fate. A search with `debug` answers one per candidate.
 */
export interface TraceEntry {
  memory_id: string;
  /** component scores (each 0..1) */
  components: Record<string, number>;
  /** which retrievers returned it: "vector", "keyword", "entity" */
  found_by: string[];
  /** unnormalised scores (cosine, bm25) */
  raw: Record<string, number>;
  /** share (0..1) of the query's entities that none of the user's memories holds */
  unknown_entities: number;
  /** share (0..1) of the things whose identifier the query asks for ("my passport number") that no memory mentions */
  unknown_asked?: number;
  record: MemoryRecord | null;
  final: number;
  /** "kept", or why not: "below top-k", "below min_score 0.1", "already in the working window", ... */
  fate: string;
  /** its rank among the hits; null for a candidate left out */
  rank: number | null;
}

/** A search's hits and its candidate table (`searchWithTrace`). */
export interface TracedSearch {
  hits: SearchHit[];
  trace: TraceEntry[];
}

/** One turn of the working window. */
export interface Turn {
  user: string;
  assistant: string;
  created_at: string;
  metadata: Record<string, unknown>;
  seq: number;
}

/** One row of a memory's audit trail. */
export interface HistoryEntry {
  ts: string;
  action: string;
  actor: string | null;
  user_id: string | null;
  detail: Record<string, unknown>;
  [field: string]: unknown;
}

/** A search that returned a memory. */
export interface Retrieval {
  at: string;
  query: string;
  rank: number;
  score: number;
  search_id: string;
}

/** Why a memory is believed: how and from which turn it was written, its history and the searches that returned it. */
export interface Explanation {
  memory_id: string;
  user_id: string;
  content: string;
  type: MemoryType;
  kind: string | null;
  status: Status;
  source: Source;
  trust: Trust;
  importance: number;
  importance_band: number;
  access_count: number;
  frequency: number;
  written_at: string;
  written_by: string;
  session_id: string | null;
  agent_id: string | null;
  supersedes: string | null;
  superseded_by: string | null;
  turns: Array<Record<string, unknown>>;
  guard: Record<string, unknown> | null;
  trust_note: Record<string, unknown> | null;
  redactions: string[];
  history: HistoryEntry[];
  retrievals: Retrieval[];
  record: MemoryRecord;
}

/** A memory to review, with every reason it was listed. */
export interface AuditFinding {
  record: MemoryRecord;
  reasons: string[];
}

/** What a maintenance run did. */
export interface MaintenanceReport {
  evicted: string[];
  purged: number;
  /** [kept id, merged ids] */
  consolidated: Array<[string, string[]]>;
  /** abstract memories written or updated (habits found among a user's repeated memories) */
  abstracted: string[];
  /** memories moved between storage tiers, by the tier they moved to (only the tiers something moved to) */
  tiered: Partial<Record<Tier, string[]>>;
}

/** What erasing a user removed (`eraseUser`): memories of every tier, and rows per table of the store. */
export interface Erasure {
  tenant_id: string;
  user_id: string;
  memories: number;
  rows: Record<string, number>;
}

/** Active memories in the hot and warm tiers, and archived ones in the cold tier. */
export type TierCounts = Record<Tier, number>;

/**
 * A scope a key may carry beyond its tenant (`portamem keys create --scope`): `admin` for the views of every
 * tenant (`stats({ all_tenants: true })`, `metrics`), `debug` for a search's candidate table (`searchWithTrace`).
 */
export type KeyScope = "admin" | "debug";

/** The key a client acts with. */
export interface WhoAmI {
  key_id: string;
  tenant_id: string;
  users: string[] | null;
  agents: string[] | null;
  read_only: boolean;
  scopes: KeyScope[];
}

/** A tenant's write-queue counters. */
export interface TenantQueueStats {
  operations: number;
  rejected: number;
  reads_audited: number;
}

/** How far the vector index is behind the committed records (`Memory.stats`). */
export interface IndexStats {
  /** rows committed, not yet reflected by the vector index */
  pending: number;
  /** seconds since the oldest of them was committed; 0 when none */
  oldest_pending_s: number;
  indexed_per_s: number;
  indexed_total: number;
  /** the last batch's failure, until a batch succeeds */
  last_error: string | null;
}

/** The whole server's statistics (`stats({ all_tenants: true })`, an `admin` key). */
export interface ServerStats {
  queue: {
    pending: number;
    max_pending: number;
    batches: number;
    operations: number;
    transactions: number;
    rejected: number;
    largest_batch: number;
    reads_audited: number;
    prepared_apart: number;
  };
  tenants: Record<string, TenantQueueStats>;
  /** the indexer's lag, where the server's memory keeps it */
  memory?: IndexStats;
}

/** The key's tenant's write-queue counters; `server` only with `all_tenants`. */
export interface Stats {
  tenant_id: string;
  queue: TenantQueueStats & { pending: number; max_pending: number };
  server?: ServerStats;
}

/** A chat message in portamem's framework-neutral form (`portamem.messages.Message.to_dict`). */
export interface NeutralMessage {
  role: "user" | "assistant" | "system" | "tool";
  text: string;
  name?: string | null;
  id?: string | null;
  created_at?: string | null;
  metadata?: Record<string, unknown>;
  /** an assistant message that asks for tools: the turn goes on until the final reply */
  calls_tools?: boolean;
  /** the framework that wrote it; that framework alone rebuilds it from `native` */
  framework?: string | null;
  native?: Record<string, unknown> | null;
}
