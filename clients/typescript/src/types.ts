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

// ---------------------------------------------------------------------- requests (from the schema)
/** One memory to save: the fields of `Memory.save_memory`. */
export type Draft = Schemas["Draft"];
export type SaveRequest = Schemas["SaveRequest"];
/** Several memories of one user, saved all or none; a plain string is a draft with only `content`. */
export type SaveManyRequest = Omit<Schemas["BatchSaveRequest"], "memories"> & { memories: Array<Draft | string> };
export type SearchRequest = Omit<Schemas["SearchRequest"], "filters"> & { filters?: SearchFilters | null };
export type ListRequest = Omit<Schemas["ListRequest"], "filters"> & { filters?: SearchFilters | null };
export type KeyedListRequest = Omit<Schemas["KeyedListRequest"], "filters"> & { filters?: SearchFilters | null };
export type UserRequest = Schemas["UserRequest"];
export type RefreshRequest = Schemas["RefreshRequest"];
export type UpdateRequest = Schemas["UpdateRequest"];
export type TurnRequest = Schemas["TurnRequest"];
export type ArchiveRequest = Omit<Schemas["ArchiveRequest"], "messages"> & { messages: NeutralMessage[] };
export type AuditRequest = Schemas["AuditRequest"];
export type MaintainRequest = Schemas["MaintainRequest"];
export type PurgeRequest = Schemas["PurgeRequest"];
export type FlushRequest = Schemas["FlushRequest"];
/** `user_id` of a route that names one memory (`GET /v1/memories/{id}` and the like). */
export type MemoryQuery = Query<"get_v1_memories__memory_id__get">;
export type ContextQuery = Query<"context_v1_context_get">;
export type ClearContextQuery = Query<"clear_context_v1_context_delete">;
/** A keyed memory's address; the namespace is its labels, as a list or joined by ".". */
export type KeyQuery = Omit<Query<"get_by_key_v1_keyed_get">, "key_namespace"> & { key_namespace?: string | string[] };
export type ExportQuery = Query<"export_v1_export_get">;
export type ImportQuery = Query<"import__v1_import_post">;

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
}

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
}

/** The key a client acts with. */
export interface WhoAmI {
  key_id: string;
  tenant_id: string;
  users: string[] | null;
  agents: string[] | null;
  read_only: boolean;
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
