/**
 * @portamem/client: the portamem HTTP API (`portamem serve`) from TypeScript and JavaScript.
 *
 * ```ts
 * import { PortamemClient, NotFoundError } from "@portamem/client";
 * const mem = new PortamemClient({ url: "http://localhost:8765", apiKey: process.env.PORTAMEM_API_KEY });
 * await mem.saveMemory({ user_id: "dana", content: "I'm allergic to hazelnuts." });
 * const hits = await mem.searchMemory({ user_id: "dana", query: "what can't she eat?", top_k: 3 });
 * ```
 *
 * The LangChain.js adapter is `@portamem/client/langchain`.
 */
export { PortamemClient, namespaceString, parseRetryAfter } from "./client.js";
export type { ClientOptions, ImportSource, RequestOptions, RetryEvent } from "./client.js";
export * from "./errors.js";
export type * from "./types.js";
export type { components, operations, paths } from "./generated/openapi.js";
