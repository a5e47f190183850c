// A client in another language: Node's fetch only, no portamem code. Saves, searches, reads a missing
// memory, and prints what it saw as one JSON line for the test to check.
const [url, key, user] = process.argv.slice(2);
const headers = { "Authorization": `Bearer ${key}`, "Content-Type": "application/json" };

async function call(method, path, body) {
  const response = await fetch(url + path, { method, headers, body: body && JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

const saved = await call("POST", "/v1/memories", { user_id: user, content: "My bike is a red Brompton, 我每天骑车上班。" });
const batch = await call("POST", "/v1/memories/batch", {
  user_id: user, memories: [{ content: "I work at the harbour office." }, { content: "My dog is called Pixel." }],
});
const hits = await call("POST", "/v1/search", { user_id: user, query: "what bike do I ride", top_k: 2 });
const chinese = await call("POST", "/v1/search", { user_id: user, query: "骑车上班", top_k: 1 });
const missing = await call("GET", `/v1/memories/${"0".repeat(32)}?user_id=${encodeURIComponent(user)}`);
const noKey = await fetch(url + "/v1/whoami");
console.log(JSON.stringify({
  saved: { status: saved.status, memory_id: saved.body.memory_id },
  batch: { status: batch.status, count: batch.body.records.length },
  top: hits.body.hits.map((h) => ({ memory_id: h.record.memory_id, found_by: h.found_by, final: h.breakdown.final })),
  chinese: chinese.body.hits.map((h) => h.record.memory_id),
  missing: { status: missing.status, type: missing.body.error.type },
  no_key: noKey.status,
}));
