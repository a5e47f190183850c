/**
 * portamem for LangChain.js (`@langchain/core` 1.x, a peer dependency):
 *
 * - `PortamemChatMessageHistory`: a `BaseListChatMessageHistory` over one session's working window.
 * - `PortamemRetriever`: a `BaseRetriever` over one user's memories (hybrid search), which also saves
 *   documents as memories (`addDocuments`, as LangChain's vector store retrievers do).
 *
 * Messages are stored as portamem's neutral messages (role, text, name, id) with LangChain.js' own
 * serialised form beside them, so LangChain.js rebuilds its messages exactly and every other adapter
 * (Python's LangChain, LlamaIndex, AgentScope, ...) reads role and text.
 */
import type { CallbackManagerForRetrieverRun } from "@langchain/core/callbacks/manager";
import { BaseListChatMessageHistory } from "@langchain/core/chat_history";
import { Document, type DocumentInterface } from "@langchain/core/documents";
import {
  AIMessage,
  type BaseMessage,
  ChatMessage,
  HumanMessage,
  type StoredMessage,
  SystemMessage,
  ToolMessage,
  mapStoredMessagesToChatMessages,
} from "@langchain/core/messages";
import { BaseRetriever, type BaseRetrieverInput } from "@langchain/core/retrievers";

import type { PortamemClient, RequestOptions } from "./client.js";
import { ValidationError } from "./errors.js";
import type { NeutralMessage, SearchFilters, SearchHit, Turn } from "./types.js";

/** The `framework` tag of messages this adapter writes: only LangChain.js rebuilds them from `native`. */
export const FRAMEWORK = "langchainjs";

/** Key of a turn's metadata that holds the messages it was folded from (`portamem.messages.MESSAGES_KEY`). */
const MESSAGES_KEY = "messages";
/** Text of a turn whose messages carry no text at all. */
const NO_TEXT = "[no text]";

const ROLE_OF_TYPE: Record<string, NeutralMessage["role"]> = {
  human: "user",
  ai: "assistant",
  system: "system",
  developer: "system",
  tool: "tool",
  function: "tool",
};
const CHAT_ROLES: Record<string, NeutralMessage["role"]> = {
  user: "user",
  human: "user",
  assistant: "assistant",
  ai: "assistant",
  system: "system",
  tool: "tool",
};

function nonEmpty(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && Object.keys(value).length > 0;
}

/** A LangChain.js message in the neutral form: role and text for every framework, its own dict for LangChain.js. */
export function toNeutral(message: BaseMessage): NeutralMessage {
  const role = ChatMessage.isInstance(message)
    ? (CHAT_ROLES[message.role] ?? "user")
    : (ROLE_OF_TYPE[message.getType()] ?? "user");
  const metadata: Record<string, unknown> = {};
  if (nonEmpty(message.additional_kwargs)) metadata["additional_kwargs"] = message.additional_kwargs;
  if (nonEmpty(message.response_metadata)) metadata["response_metadata"] = message.response_metadata;
  if (ToolMessage.isInstance(message)) metadata["tool_call_id"] = message.tool_call_id;
  return {
    role,
    text: message.text,
    name: message.name ?? null,
    id: message.id ?? null,
    created_at: null,
    metadata,
    calls_tools: AIMessage.isInstance(message) && (message.tool_calls?.length ?? 0) > 0,
    framework: FRAMEWORK,
    // the JSON form, without the undefined fields JSON drops anyway
    native: JSON.parse(JSON.stringify(message.toDict())) as Record<string, unknown>,
  };
}

/** The LangChain.js message: rebuilt exactly when LangChain.js wrote it, from role and text otherwise. */
export function fromNeutral(message: NeutralMessage): BaseMessage {
  if (message.framework === FRAMEWORK && message.native) {
    return mapStoredMessagesToChatMessages([message.native as unknown as StoredMessage])[0]!;
  }
  const fields = { content: message.text, name: message.name ?? undefined, id: message.id ?? undefined };
  switch (message.role) {
    case "assistant":
      return new AIMessage(fields);
    case "system":
      return new SystemMessage(fields);
    case "tool":
      return new ToolMessage({ ...fields, tool_call_id: String(message.metadata?.["tool_call_id"] ?? "") });
    default:
      return new HumanMessage(fields);
  }
}

function endsTurn(message: NeutralMessage): boolean {
  return message.role === "assistant" && !message.calls_tools;
}

/** Group messages into turns, each closed by a final assistant reply; the open rest apart. */
export function splitTurns(messages: NeutralMessage[]): [NeutralMessage[][], NeutralMessage[]] {
  const turns: NeutralMessage[][] = [];
  let current: NeutralMessage[] = [];
  for (const message of messages) {
    current.push(message);
    if (endsTurn(message)) {
      turns.push(current);
      current = [];
    }
  }
  return [turns, current];
}

function turnTexts(messages: NeutralMessage[]): [string, string] {
  const user = messages
    .filter((m) => m.role === "user" && m.text.trim())
    .map((m) => m.text)
    .join("\n");
  const replies = messages.filter((m) => m.role === "assistant" && m.text.trim()).map((m) => m.text);
  const lastMessage = messages[messages.length - 1];
  const final = lastMessage && endsTurn(lastMessage) && lastMessage.text.trim() ? lastMessage.text : "";
  let assistant = final || replies.join("\n");
  if (!user.trim() && !assistant.trim()) assistant = NO_TEXT;
  return [user, assistant];
}

/** The messages a window turn was folded from, or a user and an assistant message rebuilt from its text. */
export function turnMessages(turn: Turn): NeutralMessage[] {
  const stored = turn.metadata[MESSAGES_KEY];
  if (Array.isArray(stored) && stored.length > 0) return stored as NeutralMessage[];
  const out: NeutralMessage[] = [];
  if (turn.user.trim()) out.push({ role: "user", text: turn.user, created_at: turn.created_at });
  if (turn.assistant.trim()) out.push({ role: "assistant", text: turn.assistant, created_at: turn.created_at });
  return out;
}

function full(message: NeutralMessage): Required<NeutralMessage> {
  return {
    role: message.role,
    text: message.text,
    name: message.name ?? null,
    id: message.id ?? null,
    created_at: message.created_at ?? null,
    metadata: message.metadata ?? {},
    calls_tools: message.calls_tools ?? false,
    framework: message.framework ?? null,
    native: message.native ?? null,
  };
}

/** What a `PortamemChatMessageHistory` reads and writes. */
export interface PortamemChatMessageHistoryInput {
  client: PortamemClient;
  userId: string;
  sessionId?: string;
  /** signal, timeout and retries of every request the history makes */
  requestOptions?: RequestOptions;
}

/**
 * The messages of one user's session, kept as portamem window turns so any adapter, in any language,
 * reads them.
 *
 * The window stores whole turns (a user message through the final reply), so the messages of a turn
 * still in progress (after `addUserMessage`, or an AI message that calls tools) wait in this object until
 * the reply is added. Turns that leave the window become episodic memory and drop out of `getMessages`.
 */
export class PortamemChatMessageHistory extends BaseListChatMessageHistory {
  lc_namespace = ["portamem", "langchain", "chat_history"];

  readonly client: PortamemClient;
  readonly userId: string;
  readonly sessionId: string;
  private readonly requestOptions: RequestOptions | undefined;
  private openTurn: NeutralMessage[] = [];

  constructor(fields: PortamemChatMessageHistoryInput) {
    super();
    if (!fields?.client || typeof fields.userId !== "string" || !fields.userId) {
      throw new ValidationError("PortamemChatMessageHistory needs a client and a userId");
    }
    this.client = fields.client;
    this.userId = fields.userId;
    this.sessionId = fields.sessionId ?? "default";
    this.requestOptions = fields.requestOptions;
  }

  private async stored(): Promise<NeutralMessage[]> {
    const turns = await this.client.context({ user_id: this.userId, session_id: this.sessionId }, this.requestOptions);
    return turns.flatMap(turnMessages);
  }

  async getMessages(): Promise<BaseMessage[]> {
    return [...(await this.stored()), ...this.openTurn].map(fromNeutral);
  }

  async addMessage(message: BaseMessage): Promise<void> {
    await this.addMessages([message]);
  }

  /**
   * Fold the messages into turns and append the complete ones to the window, one request per turn.
   * Messages up to the last one whose id the window already holds are skipped, so a whole transcript may be
   * passed again.
   */
  override async addMessages(messages: BaseMessage[]): Promise<void> {
    let items = [...this.openTurn, ...messages.map(toNeutral)];
    if (items.some((m) => m.id)) {
      const known = new Set((await this.stored()).map((m) => m.id).filter((id): id is string => !!id));
      let lastKnown = -1;
      items.forEach((m, i) => {
        if (m.id && known.has(m.id)) lastKnown = i;
      });
      items = items.slice(lastKnown + 1);
    }
    const [turns, rest] = splitTurns(items);
    for (const group of turns) {
      const [user, assistant] = turnTexts(group);
      const createdAt = group.find((m) => m.created_at)?.created_at;
      await this.client.addTurn(
        {
          user_id: this.userId,
          session_id: this.sessionId,
          user,
          assistant,
          metadata: { [MESSAGES_KEY]: group.map(full) },
          ...(createdAt ? { created_at: createdAt } : {}),
        },
        this.requestOptions,
      );
    }
    this.openTurn = rest;
  }

  /** Drop the session's window (no episodic memory is written) and the turn in progress. */
  override async clear(): Promise<void> {
    this.openTurn = [];
    await this.client.clearContext({ user_id: this.userId, session_id: this.sessionId }, this.requestOptions);
  }
}

/** The metadata of a retrieved document: the memory's score breakdown and provenance. */
export interface MemoryDocumentMetadata {
  score: number;
  components: Record<string, number>;
  found_by: string[];
  type: string;
  trust: string;
  created_at: string;
  session_id: string | null;
  metadata: Record<string, unknown>;
  [key: string]: unknown;
}

/** A hit as a `Document`: the memory text, its id, and the score breakdown and provenance as metadata. */
export function hitToDocument(hit: SearchHit): Document<MemoryDocumentMetadata> {
  const r = hit.record;
  return new Document<MemoryDocumentMetadata>({
    pageContent: r.content,
    id: r.memory_id,
    metadata: {
      score: hit.score,
      components: { ...hit.breakdown.components },
      found_by: [...hit.found_by],
      type: r.type,
      trust: r.trust,
      created_at: r.created_at,
      session_id: r.session_id,
      metadata: { ...r.metadata },
    },
  });
}

/** What a `PortamemRetriever` searches. */
export interface PortamemRetrieverInput extends BaseRetrieverInput {
  client: PortamemClient;
  userId: string;
  /** the most memories returned (default: the server's `top_k`); scores are absolute, so fewer may come back */
  k?: number;
  filters?: SearchFilters;
  /** an agent's scope: its private memories first, then the user's shared layer; `addDocuments` saves privately */
  agentId?: string;
  requestOptions?: RequestOptions;
}

/** `invoke(query)` returns the user's best memories, best first, for RAG-style chains and agents. */
export class PortamemRetriever extends BaseRetriever<MemoryDocumentMetadata> {
  static override lc_name(): string {
    return "PortamemRetriever";
  }

  lc_namespace = ["portamem", "langchain", "retrievers"];

  readonly client: PortamemClient;
  readonly userId: string;
  k: number | undefined;
  filters: SearchFilters | undefined;
  readonly agentId: string | undefined;
  private readonly requestOptions: RequestOptions | undefined;

  constructor(fields: PortamemRetrieverInput) {
    const { client, userId, k, filters, agentId, requestOptions, ...base } = fields;
    super(base);
    if (!client || typeof userId !== "string" || !userId) {
      throw new ValidationError("PortamemRetriever needs a client and a userId");
    }
    this.client = client;
    this.userId = userId;
    this.k = k;
    this.filters = filters;
    this.agentId = agentId;
    this.requestOptions = requestOptions;
  }

  override async _getRelevantDocuments(
    query: string,
    _runManager?: CallbackManagerForRetrieverRun,
  ): Promise<DocumentInterface<MemoryDocumentMetadata>[]> {
    const filters = this.agentId === undefined ? this.filters : { ...(this.filters ?? {}), agent_id: this.agentId };
    const hits = await this.client.searchMemory(
      { user_id: this.userId, query, ...(this.k === undefined ? {} : { top_k: this.k }), ...(filters ? { filters } : {}) },
      this.requestOptions,
    );
    return hits.map(hitToDocument);
  }

  /**
   * Save documents as the user's memories (one transaction, all or none): `pageContent` is the memory's text,
   * `metadata` its metadata. Returns the new memory ids. One batch takes at most 256 documents (more is a
   * `ValidationError`); split a longer list into several calls.
   */
  async addDocuments(documents: DocumentInterface[]): Promise<string[]> {
    const records = await this.client.saveMemories(
      {
        user_id: this.userId,
        memories: documents.map((d) => ({
          content: d.pageContent,
          metadata: { ...(d.metadata ?? {}) },
          ...(this.agentId === undefined ? {} : { agent_id: this.agentId }),
        })),
      },
      this.requestOptions,
    );
    return records.map((r) => r.memory_id);
  }
}
