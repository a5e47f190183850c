// Round trips of every operation of the API through PortamemClient, against a real `portamem serve`.
import assert from "node:assert/strict";
import { createHash, randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  NotFoundError,
  PermissionDeniedError,
  PortamemClient,
  ValidationError,
  VaultError,
  type MemoryRecord,
  type Tier,
} from "@portamem/client";

import { PACKAGE_ROOT, type Served, eventually, newUser, startServer } from "./harness.js";

let server: Served;
let mem: PortamemClient;

before(async () => {
  server = await startServer();
  mem = new PortamemClient({ url: server.url, apiKey: await server.key("acme") });
});

after(async () => {
  await server?.stop();
});

describe("service", () => {
  test("health, whoami and stats", async () => {
    assert.deepEqual(await mem.health(), { status: "ok" });
    const me = await mem.whoami();
    assert.equal(me.tenant_id, "acme");
    assert.equal(me.users, null);
    assert.equal(me.read_only, false);
    assert.deepEqual(me.scopes, []);
    assert.match(me.key_id, /^[0-9a-f]+$/);
    const stats = await mem.stats();
    assert.equal(stats.tenant_id, "acme");
    assert.equal(typeof stats.queue.operations, "number");
    assert.equal(typeof stats.queue.pending, "number");
    assert.equal(stats.server, undefined);
  });

  test("every tenant's statistics and /metrics need a key with the admin scope", async () => {
    await assert.rejects(mem.stats({ all_tenants: true }), PermissionDeniedError);
    await assert.rejects(mem.metrics(), (e: unknown) => e instanceof PermissionDeniedError && e.status === 403);

    const admin = new PortamemClient({ url: server.url, apiKey: await server.key("ops", { scopes: ["admin"] }) });
    assert.deepEqual((await admin.whoami()).scopes, ["admin"]);
    await mem.saveMemory({ user_id: newUser("stats"), content: "The printer on floor two is broken." });
    const own = await admin.stats();
    assert.equal(own.tenant_id, "ops");
    assert.equal(own.server, undefined);
    const all = await admin.stats({ all_tenants: true });
    assert.equal(all.tenant_id, "ops");
    assert.ok(all.server, JSON.stringify(all));
    assert.ok(all.server.queue.operations >= 1);
    assert.ok(all.server.tenants["acme"]!.operations >= 1, JSON.stringify(all.server.tenants));
    assert.equal(typeof all.server.memory?.pending, "number");

    const text = await admin.metrics();
    assert.match(text, /^# (HELP|TYPE) /m);
    assert.match(text, /portamem_/);
  });

  test("the checked-in openapi.json, which the types are generated from, is the schema the server publishes", async () => {
    const served: unknown = await (await fetch(`${server.url}/openapi.json`)).json();
    const checkedIn: unknown = JSON.parse(await readFile(join(PACKAGE_ROOT, "openapi.json"), "utf-8"));
    assert.deepEqual(served, checkedIn, "the API changed: run `npm run gen` in clients/typescript and review the diff");
  });
});

describe("saving and reading", () => {
  test("save, get, list, history and explain return the memory as written", async () => {
    const user = newUser("save");
    const saved = await mem.saveMemory({
      user_id: user,
      content: "I'm allergic to hazelnuts.",
      metadata: { origin: "ts-test", n: 1 },
      session_id: "s1",
    });
    assert.match(saved.memory_id, /^[0-9a-f]{32}$/);
    assert.equal(saved.content, "I'm allergic to hazelnuts.");
    assert.equal(saved.user_id, user);
    assert.equal(saved.tenant_id, "acme");
    assert.equal(saved.session_id, "s1");
    assert.deepEqual(saved.metadata, { origin: "ts-test", n: 1 });
    assert.equal(saved.status, "active");

    const got = await mem.getMemory(saved.memory_id, { user_id: user });
    assert.equal(got.memory_id, saved.memory_id);
    assert.equal(got.content, saved.content);
    assert.deepEqual(got.metadata, saved.metadata);

    const listed = await mem.listMemories({ user_id: user });
    assert.deepEqual(listed.map((r) => r.memory_id), [saved.memory_id]);

    const history = await mem.history(saved.memory_id, { user_id: user });
    assert.equal(history[0]?.action, "save");
    assert.ok(!Number.isNaN(Date.parse(history[0]!.ts)));

    const why = await mem.explain(saved.memory_id, { user_id: user });
    assert.equal(why.memory_id, saved.memory_id);
    assert.equal(why.record.content, saved.content);
    assert.equal(why.content, saved.content);
    assert.ok(why.written_by.length > 0);
    assert.equal(why.history[0]?.action, "save");
  });

  test("a batch saves all its memories in order, strings and drafts alike", async () => {
    const user = newUser("batch");
    const records = await mem.saveMemories({
      user_id: user,
      memories: ["I work at the harbour office.", { content: "My dog is called Pixel.", importance: 0.9 }],
      wait: true,
    });
    assert.deepEqual(records.map((r) => r.content), ["I work at the harbour office.", "My dog is called Pixel."]);
    assert.equal(records[1]!.importance, 0.9);
    assert.deepEqual(await mem.saveMemories({ user_id: user, memories: [] }), []);
    const listed = await mem.listMemories({ user_id: user, limit: 1, offset: 1 });
    assert.deepEqual(listed.map((r) => r.memory_id), [records[1]!.memory_id]);
  });

  test("search returns each hit with its score breakdown and the retrievers that found it", async () => {
    const user = newUser("search");
    const bike = await mem.saveMemory({ user_id: user, content: "My bike is a red Brompton, 我每天骑车上班。", wait: true });
    await mem.saveMemories({ user_id: user, memories: ["My sister lives in Lisbon."], wait: true });

    const hits = await mem.searchMemory({ user_id: user, query: "what bike do I ride", top_k: 2 });
    const top = hits[0]!;
    assert.equal(top.record.memory_id, bike.memory_id);
    assert.ok(top.found_by.length > 0);
    assert.ok(top.found_by.every((f) => ["vector", "keyword", "entity"].includes(f)));
    assert.ok(top.breakdown.final > 0);
    assert.equal(top.score, top.breakdown.final);
    assert.ok("vector" in top.breakdown.components && "keyword" in top.breakdown.components);
    assert.ok(Object.keys(top.breakdown.weights).length > 0);
    assert.deepEqual(top.conflicts_with, []);

    const chinese = await mem.searchMemory({ user_id: user, query: "骑车上班", top_k: 1 });
    assert.deepEqual(chinese.map((h) => h.record.memory_id), [bike.memory_id]);

    const keywordOnly = await mem.searchMemory({ user_id: user, query: "Brompton", sources: ["keyword"] });
    assert.deepEqual(keywordOnly.map((h) => h.found_by), [["keyword"]]);

    // a touching search counts as a use, and explain lists the searches that returned the memory
    await mem.searchMemory({ user_id: user, query: "red Brompton", touch: true });
    const why = await eventually(
      () => mem.explain(bike.memory_id, { user_id: user }),
      (w) => w.retrievals.some((r) => r.query === "red Brompton"),
    );
    assert.equal(why.retrievals.find((r) => r.query === "red Brompton")!.rank, 1);
  });

  test("searchWithTrace answers every candidate's sources, scores and fate to a key with the debug scope", async () => {
    const user = newUser("trace");
    const kept = await mem.saveMemory({ user_id: user, content: "The boat is moored at pier 9.", wait: true });
    await mem.saveMemories({ user_id: user, memories: ["The car is parked on level 3.", "The bike is at the office."], wait: true });
    const query = { user_id: user, query: "where is the boat moored", top_k: 1 };
    await assert.rejects(mem.searchWithTrace(query), (e: unknown) => e instanceof PermissionDeniedError && /debug/.test(e.message));

    const debug = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { scopes: ["debug"] }) });
    const { hits, trace } = await debug.searchWithTrace(query);
    assert.deepEqual(hits.map((h) => h.record.memory_id), [kept.memory_id]);
    assert.deepEqual(
      hits.map((h) => h.record.memory_id),
      (await mem.searchMemory(query)).map((h) => h.record.memory_id),
    );
    assert.ok(trace.length >= 2, JSON.stringify(trace));
    const top = trace.find((e) => e.memory_id === kept.memory_id)!;
    assert.equal(top.fate, "kept");
    assert.equal(top.rank, 1);
    assert.equal(top.record?.content, kept.content);
    assert.ok(Math.abs(top.final - hits[0]!.score) < 1e-9);
    assert.ok(top.found_by.length > 0 && Object.keys(top.components).length > 0);
    const dropped = trace.filter((e) => e.memory_id !== kept.memory_id);
    assert.ok(dropped.every((e) => e.fate !== "kept" && e.rank === null), JSON.stringify(dropped));
  });
});

describe("changing memories", () => {
  test("forget takes a memory out of search and restore brings it back", async () => {
    const user = newUser("forget");
    const m = await mem.saveMemory({ user_id: user, content: "Our wifi password hint is the cat's name.", wait: true });
    const find = async () => (await mem.searchMemory({ user_id: user, query: "wifi password hint" })).map((h) => h.record.memory_id);
    assert.deepEqual(await find(), [m.memory_id]);

    assert.deepEqual(await mem.forgetMemory(m.memory_id, { user_id: user }), [m.memory_id]);
    assert.deepEqual(await find(), []);
    const deleted = await mem.listMemories({ user_id: user, filters: { statuses: ["deleted"] } });
    assert.deepEqual(deleted.map((r) => r.memory_id), [m.memory_id]);
    assert.deepEqual(await mem.forgetMemory([], { user_id: user }), []);

    const restored = await mem.restoreMemory(m.memory_id, { user_id: user });
    assert.equal(restored.status, "active");
    assert.deepEqual(await find(), [m.memory_id]);
  });

  test("refresh, update and confirm change the memory and keep its id", async () => {
    const user = newUser("change");
    const m = await mem.saveMemory({ user_id: user, content: "The team offsite is in Porto.", importance: 0.4 });
    const refreshed = await mem.refreshMemory(m.memory_id, { user_id: user, delta: 0.2 });
    assert.equal(refreshed.memory_id, m.memory_id);
    assert.ok(Math.abs(refreshed.importance - 0.6) < 1e-9, `importance ${refreshed.importance}`);
    assert.ok(refreshed.last_accessed_at !== null);

    const updated = await mem.updateMemory(m.memory_id, {
      user_id: user,
      content: "The team offsite moved to Braga.",
      metadata: { edited: true },
    });
    assert.equal(updated.memory_id, m.memory_id);
    assert.equal(updated.content, "The team offsite moved to Braga.");
    assert.deepEqual(updated.metadata, { edited: true });
    assert.equal((await mem.getMemory(m.memory_id, { user_id: user })).content, "The team offsite moved to Braga.");
    const actions = (await mem.history(m.memory_id, { user_id: user })).map((h) => h.action);
    assert.ok(actions.includes("update"), `history ${actions}`);

    // a low-trust memory waits pending until it is confirmed, and the audit lists it meanwhile
    const low = await mem.saveMemory({ user_id: user, content: "A forum post says the venue has parking.", trust: "low", source: "web" });
    assert.equal(low.status, "pending");
    const findings = await mem.auditScan({ user_id: user });
    const finding = findings.find((f) => f.record.memory_id === low.memory_id);
    assert.ok(finding && finding.reasons.length > 0, JSON.stringify(findings));
    const confirmed = await mem.confirmMemory(low.memory_id, { user_id: user });
    assert.equal(confirmed.memory_id, low.memory_id);
    assert.equal(confirmed.status, "active");
  });

  test("a redacted memory's sealed original is asked for through reveal", async () => {
    const user = newUser("reveal");
    const m = await mem.saveMemory({ user_id: user, content: "The meeting room is on the third floor." });
    await assert.rejects(mem.revealSealed(m.memory_id, { user_id: user }), (e: unknown) => {
      assert.ok(e instanceof VaultError);
      assert.equal(e.status, 422);
      assert.match(e.message, /no sealed original/);
      return true;
    });
  });
});

describe("keyed memories", () => {
  test("a key is upserted in place, listed under its namespace and forgotten", async () => {
    const user = newUser("keyed");
    const first = await mem.saveMemory({ user_id: user, content: "Dana is vegetarian.", key: "diet", key_namespace: ["profile"] });
    const second = await mem.saveMemory({ user_id: user, content: "Dana is vegan now.", key: "diet", key_namespace: "profile" });
    assert.equal(second.memory_id, first.memory_id);
    assert.equal(second.key, "diet");
    assert.equal(second.key_namespace, "profile");

    const got = await mem.getByKey({ user_id: user, key: "diet", key_namespace: ["profile"] });
    assert.equal(got.content, "Dana is vegan now.");
    await mem.saveMemory({ user_id: user, content: "Dana runs on Sundays.", key: "sport", key_namespace: "profile.habits" });
    const listed = await mem.listKeyed({ user_id: user, key_namespace: ["profile"] });
    assert.deepEqual(listed.map((r) => r.key).sort(), ["diet", "sport"]);

    assert.equal(await mem.forgetByKey({ user_id: user, key: "diet", key_namespace: "profile" }), first.memory_id);
    await assert.rejects(mem.getByKey({ user_id: user, key: "diet", key_namespace: "profile" }), NotFoundError);
  });
});

describe("working window", () => {
  test("turns go into the session's window, which context reads and clearContext empties", async () => {
    const user = newUser("window");
    const wrote = await mem.addTurn({
      user_id: user,
      session_id: "chat-1",
      user: "My order number is ORD-58213.",
      assistant: "Noted!",
      metadata: { channel: "web" },
    });
    assert.ok(Array.isArray(wrote));
    assert.ok(wrote.some((r: MemoryRecord) => r.content.includes("ORD-58213")), JSON.stringify(wrote));
    await mem.addTurn({ user_id: user, session_id: "chat-1", user: "Can you ship it to Lisbon?", assistant: "Yes." });

    const turns = await mem.context({ user_id: user, session_id: "chat-1" });
    assert.deepEqual(
      turns.map((t) => [t.user, t.assistant]),
      [
        ["My order number is ORD-58213.", "Noted!"],
        ["Can you ship it to Lisbon?", "Yes."],
      ],
    );
    assert.deepEqual(turns[0]!.metadata, { channel: "web" });
    assert.ok(turns[1]!.seq > turns[0]!.seq);
    assert.deepEqual(await mem.context({ user_id: user, session_id: "other" }), []);

    const popped = await mem.popTurn({ user_id: user, session_id: "chat-1" });
    assert.deepEqual([popped?.user, popped?.assistant], ["Can you ship it to Lisbon?", "Yes."]);
    assert.deepEqual(
      (await mem.context({ user_id: user, session_id: "chat-1" })).map((t) => t.user),
      ["My order number is ORD-58213."],
    );

    await mem.clearContext({ user_id: user, session_id: "chat-1" });
    assert.deepEqual(await mem.context({ user_id: user, session_id: "chat-1" }), []);
    assert.equal(await mem.popTurn({ user_id: user, session_id: "chat-1" }), null);
  });

  test("messages that left a framework's window are archived as one episodic memory", async () => {
    const user = newUser("archive");
    const record = await mem.archiveMessages({
      user_id: user,
      session_id: "s",
      messages: [
        { role: "user", text: "I booked flight TP1234 to Lisbon for 12 May." },
        { role: "assistant", text: "Great, TP1234 on 12 May is noted." },
      ],
    });
    assert.ok(record !== null);
    assert.equal(record.type, "episodic");
    assert.match(record.content, /TP1234/);
  });
});

describe("tenant-wide operations", () => {
  test("users, maintain, purge and reindex with a tenant-wide key", async () => {
    const admin = new PortamemClient({ url: server.url, apiKey: await server.key("admin-tenant") });
    const user = newUser("admin");
    await admin.saveMemory({ user_id: user, content: "The quarterly report is due on Friday." });
    assert.deepEqual(await admin.userIds(), [user]);
    const report = await admin.maintain();
    assert.ok(Array.isArray(report.evicted) && typeof report.purged === "number" && Array.isArray(report.consolidated)
      && Array.isArray(report.abstracted) && typeof report.tiered === "object");
    assert.equal(typeof (await admin.purgeDeleted({ older_than_days: 0 })), "number");
    assert.equal(await admin.reindex(), 1);
    await admin.flush({ timeout: 120 });
  });

  test("eraseUser erases one user with a read-write admin key and is refused to any other key", async () => {
    const admin = new PortamemClient({ url: server.url, apiKey: await server.key("erase-tenant", { scopes: ["admin"] }) });
    const plain = new PortamemClient({ url: server.url, apiKey: await server.key("erase-tenant") });
    const gone = newUser("erased");
    const kept = newUser("kept");
    const saved = await admin.saveMemory({ user_id: gone, content: "My bike lock word is quokkafeather.", wait: true });
    await admin.saveMemory({ user_id: kept, content: "I love the cellist Hildegunnvar.", wait: true });
    await assert.rejects(plain.eraseUser({ user_id: gone }), PermissionDeniedError);
    const done = await admin.eraseUser({ user_id: gone });
    assert.equal(done.user_id, gone);
    assert.equal(done.memories, 1);
    assert.ok((done.rows["memories"] ?? 0) >= 1);
    await assert.rejects(admin.getMemory(saved.memory_id, { user_id: gone }), NotFoundError);
    assert.deepEqual(await admin.searchMemory({ user_id: gone, query: "quokkafeather" }), []);
    assert.deepEqual(await admin.userIds(), [kept]);
  });
});

/**
 * An export of one memory written and last changed `days` ago: a server maintains at its own time, so an old
 * memory is imported (1000 days: far past any tier's threshold; semantic memories are never evicted by decay).
 */
function agedExport(userId: string, content: string, days: number): { text: string; memoryId: string } {
  const past = new Date(Date.now() - days * 86_400_000).toISOString();
  const record = { content, user_id: userId, memory_id: randomUUID().replace(/-/g, ""), created_at: past, updated_at: past };
  const header = { format: "portamem-export", version: 2, user_id: userId, records: 1, turns: 0 };
  const body = [header, { record }].map((o) => JSON.stringify(o) + "\n").join("");
  const sha256 = createHash("sha256").update(body).digest("hex");
  return { text: body + JSON.stringify({ trailer: { records: 1, turns: 0, sha256 } }) + "\n", memoryId: record.memory_id };
}

describe("storage tiers", () => {
  test("maintenance moves an old memory to the cold tier, where it is listed, fetched and searched when named, and setTier brings it back", async () => {
    const tiers = new PortamemClient({ url: server.url, apiKey: await server.key("tiers-tenant") });
    const user = newUser("tiers");
    const aged = agedExport(user, "Watched the documentary about octopuses with Sam.", 1000);
    assert.equal(await tiers.import(aged.text, { trusted: true }), 1);
    const old = await tiers.getMemory(aged.memoryId, { user_id: user });
    assert.equal(old.tier, "hot");
    const recent = await tiers.saveMemory({ user_id: user, content: "Booked the dentist for next Thursday.", wait: true });
    assert.equal(recent.tier, "hot");
    assert.equal(recent.tiered_at, null);
    assert.equal(old.tiered_at, null);

    const report = await tiers.maintain();
    assert.deepEqual(report.tiered, { cold: [old.memory_id] });
    assert.deepEqual(await tiers.tierCounts({ user_id: user }), { hot: 1, warm: 0, cold: 1 });
    assert.deepEqual(await tiers.tierCounts(), { hot: 1, warm: 0, cold: 1 });

    const archived = await tiers.listMemories({ user_id: user, filters: { tiers: ["cold"] } });
    assert.deepEqual(archived.map((r) => [r.memory_id, r.tier]), [[old.memory_id, "cold"]]);
    assert.deepEqual((await tiers.listMemories({ user_id: user })).map((r) => r.memory_id), [recent.memory_id]);
    const fetched = await tiers.getMemory(old.memory_id, { user_id: user });
    assert.equal(fetched.tier, "cold");
    assert.ok(fetched.tiered_at !== null);
    const hits = await tiers.searchMemory({ user_id: user, query: "documentary about octopuses", tiers: ["cold"] });
    assert.deepEqual(hits.map((h) => [h.record.memory_id, h.record.tier]), [[old.memory_id, "cold"]]);

    assert.deepEqual(await tiers.setTier(old.memory_id, { user_id: user, tier: "hot" }), [old.memory_id]);
    assert.deepEqual(await tiers.setTier([old.memory_id], { user_id: user, tier: "hot" }), []);
    assert.deepEqual(await tiers.setTier([], { user_id: user, tier: "warm" }), []);
    assert.equal((await tiers.getMemory(old.memory_id, { user_id: user })).tier, "hot");
    assert.deepEqual(await tiers.tierCounts({ user_id: user }), { hot: 2, warm: 0, cold: 0 });
    const me = await tiers.whoami();
    const moves = (await tiers.history(old.memory_id, { user_id: user })).filter((h) => h.action === "tier");
    assert.deepEqual(moves.map((h) => [(h.detail as { to: string }).to, h.actor]), [["cold", "maintain"], ["hot", me.key_id]]);
  });

  test("setTier and tierCounts refuse with the typed errors", async () => {
    const user = newUser("tiers-refused");
    const keyed = await mem.saveMemory({ user_id: user, content: "Loyalty number LH-99812.", key: "loyalty" });
    await assert.rejects(mem.setTier(keyed.memory_id, { user_id: user, tier: "cold" }), ValidationError);
    await assert.rejects(mem.setTier(keyed.memory_id, { user_id: user, tier: "lukewarm" as Tier }), ValidationError);
    await assert.rejects(mem.searchMemory({ user_id: user, query: "loyalty", tiers: [] }), ValidationError);
    await assert.rejects(mem.setTier(keyed.memory_id, { user_id: newUser("other"), tier: "warm" }), NotFoundError);
    const reader = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { readOnly: true }) });
    await assert.rejects(reader.setTier(keyed.memory_id, { user_id: user, tier: "warm" }), PermissionDeniedError);
    const bound = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { users: [user] }) });
    await assert.rejects(bound.tierCounts(), PermissionDeniedError);
    assert.deepEqual(await bound.tierCounts({ user_id: user }), { hot: 1, warm: 0, cold: 0 });
    assert.equal((await mem.getMemory(keyed.memory_id, { user_id: user })).tier, "hot");
  });
});

describe("export and import", () => {
  test("an export streams as JSON lines and imports unchanged into another tenant", async () => {
    const user = newUser("export");
    const saved = await mem.saveMemories({
      user_id: user,
      memories: ["I prefer window seats on long flights.", "Mi madre vive en Sevilla. 我妈妈住在塞维利亚。"],
    });
    await mem.addTurn({ user_id: user, user: "Book me a window seat.", assistant: "Done." });

    const lines: string[] = [];
    for await (const line of mem.exportLines({ user_id: user })) lines.push(line);
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal((parsed[0] as { format?: string }).format, "portamem-export");
    assert.ok("trailer" in parsed[parsed.length - 1]!);
    const exported = parsed.filter((p) => "record" in p).map((p) => (p["record"] as MemoryRecord).content);
    for (const r of saved) assert.ok(exported.includes(r.content), `${r.content} not in the export`);
    assert.equal(parsed.filter((p) => "turn" in p).length, 1);

    // the raw stream is the same bytes
    const chunks: Uint8Array[] = [];
    const reader = (await mem.exportStream({ user_id: user })).getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
    const raw = Buffer.concat(chunks).toString("utf-8");
    assert.equal(raw.trim().split("\n").length, lines.length);

    // imported into another tenant, streamed chunk by chunk
    const other = new PortamemClient({ url: server.url, apiKey: await server.key("import-tenant") });
    async function* chunked(): AsyncGenerator<string> {
      for (const line of lines) yield line + "\n";
    }
    const imported = await other.import(chunked());
    assert.equal(imported, exported.length);
    const back = await other.listMemories({ user_id: user });
    assert.deepEqual(back.map((r) => r.content).sort(), [...exported].sort());
    assert.deepEqual((await other.context({ user_id: user })).map((t) => t.user), ["Book me a window seat."]);

    // a second import of the same file: skip what exists, from a plain string body
    assert.equal(await other.import(lines.join("\n") + "\n", { on_conflict: "skip" }), 0);
  });
});
