// Metadata filters through PortamemClient against a real `portamem serve`: search and list, typed errors.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { PortamemClient, ValidationError, type MetadataFilter } from "@portamem/client";

import { type Served, newUser, startServer } from "./harness.js";

let server: Served;
let mem: PortamemClient;

before(async () => {
  server = await startServer();
  mem = new PortamemClient({ url: server.url, apiKey: await server.key("acme") });
});

after(async () => {
  await server?.stop();
});

describe("metadata filters", () => {
  test("search and list admit only memories whose metadata matches, before ranking", async () => {
    const user = newUser("metadata");
    const notes: [string, Record<string, unknown>][] = [
      ["The rocket launch checklist is in the shared drive", { project: "apollo", priority: 3 }],
      ["The rocket launch checklist lives in Notion", { project: "gemini", priority: 5 }],
      ["Rocket launch checklist: check the fuel lines", { project: "apollo", priority: 1 }],
      ["火箭发射检查清单放在共享盘里", { project: "apollo", priority: 4, owner: { team: "核心" } }],
    ];
    for (const [content, metadata] of notes) await mem.saveMemory({ user_id: user, content, metadata, wait: true });
    const filter: MetadataFilter = { project: "apollo", priority: { $gte: 2 } };
    const hits = await mem.searchMemory({ user_id: user, query: "rocket launch checklist", top_k: 10, filters: { metadata: filter } });
    assert.deepEqual(new Set(hits.map((h) => h.record.content)), new Set([notes[0]![0], notes[3]![0]]));
    const listed = await mem.listMemories({ user_id: user, filters: { metadata: { "owner.team": "核心" } } });
    assert.deepEqual(listed.map((r) => r.content), [notes[3]![0]]);
    const some = await mem.listMemories({ user_id: user, filters: { metadata: { priority: { $in: [1, 5] } } } });
    assert.deepEqual(some.map((r) => r.metadata["priority"]).sort(), [1, 5]);
  });

  test("a bad operator or operand is a ValidationError naming it", async () => {
    const user = newUser("metadata-bad");
    await assert.rejects(
      mem.searchMemory({ user_id: user, query: "x", filters: { metadata: { p: { $regex: "a" } as never } } }),
      (err: unknown) => err instanceof ValidationError && err.message.includes("$regex"),
    );
    await assert.rejects(
      mem.listMemories({ user_id: user, filters: { metadata: { p: { $gt: null as never } } } }),
      ValidationError,
    );
  });
});
