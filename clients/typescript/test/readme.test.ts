// The TypeScript example of the repository's README answers the question it asks: "what can't she eat?"
// finds "I'm allergic to hazelnuts." (it once returned [] : the paraphrase scored under min_score).
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { PortamemClient } from "@portamem/client";

import { PACKAGE_ROOT, type Served, newUser, startServer } from "./harness.js";

let server: Served;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

test("the README's TypeScript example finds the allergy it asks about", async () => {
  const readme = await readFile(join(PACKAGE_ROOT, "..", "..", "README.md"), "utf-8");
  const block = readme.split("### TypeScript and LangChain.js")[1]?.match(/```ts\n([\s\S]*?)```/)?.[1] ?? "";
  // the calls below are the example's own
  assert.ok(block.includes(`await mem.saveMemory({ user_id: "dana", content: "I'm allergic to hazelnuts." });`));
  assert.ok(block.includes(`await mem.searchMemory({ user_id: "dana", query: "what can't she eat?", top_k: 3 })`));

  const mem = new PortamemClient({ url: server.url, apiKey: await server.key("acme") });
  const user = newUser("dana");
  await mem.saveMemory({ user_id: user, content: "I'm allergic to hazelnuts." });
  const hits = await mem.searchMemory({ user_id: user, query: "what can't she eat?", top_k: 3 });
  assert.deepEqual(hits.map((h) => h.record.content), ["I'm allergic to hazelnuts."]);
});
