// Save, search and read back through a running `portamem serve` (with a key from `portamem keys create`,
// or no key against a local `portamem serve --keyless`):
//   PORTAMEM_URL=http://127.0.0.1:8765 PORTAMEM_API_KEY=pm_... node examples/quickstart.js
import { NotFoundError, PortamemClient } from "@portamem/client";

const mem = new PortamemClient({ url: process.env["PORTAMEM_URL"] ?? "http://127.0.0.1:8765" });

await mem.saveMemory({ user_id: "dana", content: "I'm allergic to hazelnuts." });
await mem.saveMemory({ user_id: "dana", content: "我下个月去上海参加烘焙展。" });

for (const hit of await mem.searchMemory({ user_id: "dana", query: "what can't she eat?", top_k: 3 })) {
  console.log(hit.score.toFixed(2), hit.record.content, hit.breakdown.components, hit.found_by);
}

// the working window counts turns; turns that leave it become episodic memory
await mem.addTurn({ user_id: "dana", session_id: "chat-1", user: "My order number is ORD-58213.", assistant: "Noted!" });
console.log(await mem.context({ user_id: "dana", session_id: "chat-1" }));

try {
  await mem.getMemory("0".repeat(32), { user_id: "dana" });
} catch (e) {
  if (!(e instanceof NotFoundError)) throw e;
  console.log(`${e.name} (HTTP ${e.status}): ${e.message}`);
}

// a portable JSON-lines export, streamed
for await (const line of mem.exportLines({ user_id: "dana" })) console.log(line.slice(0, 80));
