// Typed errors from the server's JSON error body, retries on 429 and 503, timeouts and cancellation,
// against a real `portamem serve`.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { request } from "node:http";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";

import {
  AuthenticationError,
  ContentTooLongError,
  ERROR_CLASSES,
  HostNotAllowedError,
  IndexingTimeoutError,
  NotFoundError,
  OverloadedError,
  PayloadTooLargeError,
  PermissionDeniedError,
  PortamemClient,
  PortamemError,
  StoreError,
  StoreUnreachableError,
  UnsupportedContentError,
  ValidationError,
  VectorExtensionMissingError,
  errorFromResponse,
  type RetryEvent,
  type SaveRequest,
} from "@portamem/client";

import { type Served, newUser, python, startServer } from "./harness.js";

let server: Served;
let key: string;
let mem: PortamemClient;

before(async () => {
  server = await startServer();
  key = await server.key("acme");
  mem = new PortamemClient({ url: server.url, apiKey: key });
});

after(async () => {
  await server?.stop();
});

/** `promise` rejects with an instance of `cls` carrying `status` and the server's type name. */
async function rejectsWith(
  promise: Promise<unknown>,
  cls: abstract new (...args: never[]) => PortamemError,
  status: number | undefined,
  type: string = cls.name,
): Promise<PortamemError> {
  let caught: unknown;
  await assert.rejects(promise, (e: unknown) => {
    caught = e;
    return true;
  });
  assert.ok(caught instanceof cls, `expected ${cls.name}, got ${String(caught)}`);
  assert.ok(caught instanceof PortamemError);
  assert.equal(caught.status, status);
  assert.equal(caught.type, type);
  assert.equal(caught.name, type);
  assert.ok(caught.message.length > 0);
  return caught;
}

describe("error classes", () => {
  test("are the classes of portamem.errors, by name", async () => {
    const { stdout } = await promisify(execFile)(python(), [
      "-c",
      "import json, portamem.errors as e; print(json.dumps(e.__all__))",
    ]);
    assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), (JSON.parse(stdout) as string[]).sort());
    assert.ok(new ContentTooLongError("x") instanceof ValidationError);
    assert.ok(new UnsupportedContentError("x") instanceof ValidationError);
    assert.ok(new OverloadedError("x") instanceof StoreError);
    assert.ok(new IndexingTimeoutError("x") instanceof StoreError);
    assert.ok(new StoreUnreachableError("x") instanceof StoreError);
    const missing = new VectorExtensionMissingError("x", { url: "postgresql://db" });
    assert.ok(missing instanceof StoreError && missing.url === "postgresql://db");
    assert.ok(new PayloadTooLargeError("x") instanceof ValidationError);
    assert.ok(new HostNotAllowedError("x") instanceof PermissionDeniedError);
  });

  test("an answer without an error body is classed by its status", () => {
    for (const [status, cls] of [
      [413, PayloadTooLargeError],
      [421, HostNotAllowedError],
      [422, ValidationError],
      [403, PermissionDeniedError],
    ] as const) {
      const e = errorFromResponse(status, "<html>proxy page</html>");
      assert.ok(e instanceof cls, `${status}: ${e.name}`);
      assert.equal(e.status, status);
      assert.equal(e.type, cls.name);
    }
  });
});

/** A `fetch` over node:http that sends `host` as the Host header (the global fetch sets its own). */
function fetchWithHost(host: string): typeof fetch {
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const headers = { ...(init?.headers as Record<string, string> | undefined), Host: host };
      const req = request(String(input), { method: init?.method ?? "GET", headers, signal: init?.signal ?? undefined }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const out = new Headers();
          for (const [name, value] of Object.entries(res.headers)) if (typeof value === "string") out.set(name, value);
          resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 0, headers: out }));
        });
      });
      req.on("error", reject);
      req.end(typeof init?.body === "string" ? init.body : undefined);
    });
}

describe("HTTP errors", () => {
  test("401: no key, or an unknown one", async () => {
    const anonymous = new PortamemClient({ url: server.url, apiKey: "" });
    const e = await rejectsWith(anonymous.whoami(), AuthenticationError, 401);
    assert.match(e.message, /API key/);
    const forged = new PortamemClient({ url: server.url, apiKey: "pm_000000000000_not-a-secret" });
    await rejectsWith(forged.searchMemory({ user_id: "dana", query: "anything" }), AuthenticationError, 401);
    // the health check needs no key
    assert.deepEqual(await anonymous.health(), { status: "ok" });
  });

  test("403: a read-only key writing, a key bound to users or agents acting beyond them", async () => {
    const user = newUser("scoped");
    const readOnly = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { readOnly: true }) });
    await rejectsWith(readOnly.saveMemory({ user_id: user, content: "I like tea." }), PermissionDeniedError, 403);
    assert.deepEqual(await readOnly.searchMemory({ user_id: user, query: "tea" }), []);

    const bound = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { users: [user] }) });
    await bound.saveMemory({ user_id: user, content: "I like green tea." });
    await rejectsWith(bound.searchMemory({ user_id: "someone-else", query: "tea" }), PermissionDeniedError, 403);
    await rejectsWith(bound.userIds(), PermissionDeniedError, 403);

    const agent = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { agents: ["sales"] }) });
    await rejectsWith(agent.saveMemory({ user_id: user, content: "Prefers email.", agent_id: "support" }), PermissionDeniedError, 403);
    assert.equal((await agent.saveMemory({ user_id: user, content: "Prefers email." })).agent_id, "sales");
  });

  test("404: a missing memory, and one of another tenant or user, answer alike", async () => {
    const user = newUser("missing");
    const e = await rejectsWith(mem.getMemory("0".repeat(32), { user_id: user }), NotFoundError, 404);
    assert.match(e.message, /no memory/);

    const theirs = new PortamemClient({ url: server.url, apiKey: await server.key("other-tenant") });
    const hidden = await theirs.saveMemory({ user_id: user, content: "Their secret plan is Tuesday." });
    await rejectsWith(mem.getMemory(hidden.memory_id, { user_id: user }), NotFoundError, 404);
    await rejectsWith(mem.forgetMemory(hidden.memory_id, { user_id: user }), NotFoundError, 404);

    const bound = new PortamemClient({ url: server.url, apiKey: await server.key("acme", { users: [user] }) });
    const mine = await mem.saveMemory({ user_id: "not-bound", content: "Lunch is at noon." });
    await rejectsWith(bound.getMemory(mine.memory_id, { user_id: "not-bound" }), NotFoundError, 404);
    await rejectsWith(mem.getByKey({ user_id: user, key: "nothing" }), NotFoundError, 404);
  });

  test("413: a body over the server's size limit (4 MiB), refused before its key is checked", async () => {
    const user = newUser("big");
    // 48 shown texts of 90,000 characters: 4.3 MB of JSON, within the schema's bounds (200 texts of 100,000)
    const shown = Array.from({ length: 48 }, (_, i) => `${i} ${"x".repeat(90_000)}`);
    const e = await rejectsWith(mem.searchMemory({ user_id: user, query: "x", shown }), PayloadTooLargeError, 413);
    assert.ok(e instanceof ValidationError);
    assert.match(e.message, /larger than this server takes/);
    // a save whose metadata makes it too large writes nothing
    const huge = { blob: "y".repeat(5 * 1024 * 1024) };
    await rejectsWith(mem.saveMemory({ user_id: user, content: "A note with a large attachment.", metadata: huge }), PayloadTooLargeError, 413);
    assert.deepEqual(await mem.listMemories({ user_id: user }), []);
    // the size is checked first: a request without a key gets the same answer, not 401
    const anonymous = new PortamemClient({ url: server.url, apiKey: "" });
    await rejectsWith(anonymous.searchMemory({ user_id: user, query: "x", shown }), PayloadTooLargeError, 413);
    // a large body within the limit is taken
    assert.deepEqual(await mem.searchMemory({ user_id: user, query: "x", shown: shown.slice(0, 4) }), []);
  });

  test("421: a Host the loopback server does not answer to", async () => {
    const rebound = new PortamemClient({ url: server.url, apiKey: key, fetch: fetchWithHost("attacker.example") });
    const e = await rejectsWith(rebound.whoami(), HostNotAllowedError, 421);
    assert.ok(e instanceof PermissionDeniedError);
    assert.match(e.message, /attacker\.example/);
    // the health check too: nothing is answered to a foreign Host
    await rejectsWith(rebound.health(), HostNotAllowedError, 421);
    const local = new PortamemClient({ url: server.url, apiKey: key, fetch: fetchWithHost("localhost") });
    assert.equal((await local.whoami()).tenant_id, "acme");
  });

  test("422: a body the schema refuses, and a value the memory refuses", async () => {
    const user = newUser("invalid");
    const noContent = { user_id: user } as unknown as SaveRequest;
    const e = await rejectsWith(mem.saveMemory(noContent), ValidationError, 422);
    assert.match(e.message, /content/);
    await rejectsWith(mem.searchMemory({ user_id: user, query: "x", top_k: 0 }), ValidationError, 422);
    // the schema's list bounds: 256 memories a batch, 200 shown texts a search
    const batch = Array.from({ length: 257 }, (_, i) => `Note ${i}.`);
    const tooMany = await rejectsWith(mem.saveMemories({ user_id: user, memories: batch }), ValidationError, 422);
    assert.match(tooMany.message, /256/);
    assert.deepEqual(await mem.listMemories({ user_id: user }), []);
    const shown = Array.from({ length: 201 }, (_, i) => `Shown ${i}.`);
    await rejectsWith(mem.searchMemory({ user_id: user, query: "x", shown }), ValidationError, 422);
    const unknownField = { user_id: user, content: "x", tenant_id: "other" } as unknown as SaveRequest;
    await rejectsWith(mem.saveMemory(unknownField), ValidationError, 422);
    const badFilter = { bogus: 1 } as unknown as Record<string, never>;
    await rejectsWith(mem.searchMemory({ user_id: user, query: "x", filters: badFilter }), ValidationError, 422);
    const long = await rejectsWith(
      mem.saveMemory({ user_id: user, content: "word ".repeat(4000) }),
      ContentTooLongError,
      422,
    );
    assert.ok(long instanceof ValidationError);
    // client-side checks throw the same classes before any request
    await assert.rejects(mem.updateMemory("a".repeat(32), { user_id: user }), ValidationError);
    await assert.rejects(mem.getMemory(" ", { user_id: user }), ValidationError);
  });
});

describe("retries", () => {
  test("503: a flush that times out is IndexingTimeoutError, retried with backoff until it succeeds", async () => {
    const user = newUser("backlog");
    const backlog = (n: number) => Array.from({ length: n }, (_, i) => `Backlog note ${i}: the shelf ${i} holds box ${i * 7}.`);
    // 300 memories in batches of at most 256, the most one batch takes
    const saveBacklog = async (memories: string[]) => {
      for (let i = 0; i < memories.length; i += 150) await mem.saveMemories({ user_id: user, memories: memories.slice(i, i + 150) });
    };
    await saveBacklog(backlog(300));
    await rejectsWith(mem.flush({ timeout: 0.001 }, { retries: 0 }), IndexingTimeoutError, 503);

    await saveBacklog(backlog(300).map((t) => `Second ${t}`));
    const events: RetryEvent[] = [];
    const patient = new PortamemClient({
      url: server.url,
      apiKey: key,
      retries: 40,
      retryBaseMs: 100,
      maxRetryDelayMs: 2000,
      onRetry: (e) => events.push(e),
    });
    await patient.flush({ timeout: 0.001 });
    assert.ok(events.length > 0, "the flush never had to be retried");
    for (const [i, e] of events.entries()) {
      assert.equal(e.status, 503);
      assert.ok(e.error instanceof IndexingTimeoutError);
      assert.equal(e.attempt, i + 1);
      assert.equal(e.path, "/v1/flush");
      const span = Math.min(100 * 2 ** i, 2000);
      assert.ok(e.delayMs >= span / 2 && e.delayMs <= span, `retry ${i + 1} waited ${e.delayMs} ms`);
    }

    // cancelling while the client waits to retry ends the call with the signal's reason
    await saveBacklog(backlog(300).map((t) => `Third ${t}`));
    const controller = new AbortController();
    const stop = new Error("stopped by the caller");
    const waiting = new PortamemClient({
      url: server.url,
      apiKey: key,
      retries: 5,
      retryBaseMs: 60_000,
      maxRetryDelayMs: 120_000,
      onRetry: () => controller.abort(stop),
    });
    const started = Date.now();
    await assert.rejects(waiting.flush({ timeout: 0.001 }, { signal: controller.signal }), (e: unknown) => e === stop);
    assert.ok(Date.now() - started < 30_000);
    await mem.flush({ timeout: 300 });
  });

  test("429: a full write queue is OverloadedError with Retry-After, retried no sooner than it says", async () => {
    const busy = await startServer(["--max-queue", "1"]);
    try {
      const busyKey = await busy.key("acme");
      const user = newUser("burst");
      const burst = (client: PortamemClient, round: number) =>
        Promise.allSettled(
          Array.from({ length: 40 }, (_, i) => client.saveMemory({ user_id: user, content: `Burst ${round} note ${i} about crate ${i}.` })),
        );

      // without retries some of a burst of concurrent saves are refused
      const eager = new PortamemClient({ url: busy.url, apiKey: busyKey, retries: 0 });
      let refused: PortamemError | undefined;
      let written = 0;
      for (let round = 0; round < 10 && !refused; round++) {
        const results = await burst(eager, round);
        written += results.filter((r) => r.status === "fulfilled").length;
        const failure = results.find((r) => r.status === "rejected");
        if (failure) refused = (failure as PromiseRejectedResult).reason as PortamemError;
      }
      assert.ok(refused, "no save of ten bursts of 40 was refused by a queue of 1");
      assert.ok(refused instanceof OverloadedError, String(refused));
      assert.ok(refused instanceof StoreError);
      assert.equal(refused.status, 429);
      assert.equal(refused.type, "OverloadedError");
      assert.equal(refused.retryAfterMs, 1000);

      // with retries every save of a burst lands, each retry after at least Retry-After
      const events: RetryEvent[] = [];
      const patient = new PortamemClient({ url: busy.url, apiKey: busyKey, retries: 30, onRetry: (e) => events.push(e) });
      for (let round = 10; round < 20 && events.length === 0; round++) {
        const results = await burst(patient, round);
        assert.deepEqual(results.filter((r) => r.status === "rejected"), []);
        written += results.length;
      }
      assert.ok(events.length > 0, "no save of ten bursts was retried");
      for (const e of events) {
        assert.equal(e.status, 429);
        assert.ok(e.error instanceof OverloadedError);
        assert.ok(e.delayMs >= 1000, `a retry after Retry-After: 1 waited ${e.delayMs} ms`);
      }
      // a refused save wrote nothing, so each acknowledged one is one row (merged duplicates included)
      const everyStatus = { statuses: ["active", "pending", "quarantined", "deleted", "superseded"] as const };
      const stored = await patient.listMemories({ user_id: user, filters: { statuses: [...everyStatus.statuses] } });
      assert.equal(stored.length, written, "every acknowledged save is stored once, every refused one not at all");
    } finally {
      await busy.stop();
    }
  });
});

describe("timeouts and cancellation", () => {
  test("an attempt that outlasts timeoutMs is StoreUnreachableError", async () => {
    const user = newUser("slow");
    const e = await rejectsWith(
      mem.saveMemory({ user_id: user, content: "I water the plants on Mondays.", wait: true }, { timeoutMs: 1 }),
      StoreUnreachableError,
      undefined,
    );
    assert.match(e.message, /within 1 ms/);
  });

  test("an AbortSignal cancels a call in flight, and one aborted before sends nothing", async () => {
    const user = newUser("abort");
    const controller = new AbortController();
    const call = mem.saveMemory({ user_id: user, content: "The spare key is under the blue pot.", wait: true }, { signal: controller.signal });
    setTimeout(() => controller.abort(), 1);
    await assert.rejects(call, (e: unknown) => e instanceof Error && e.name === "AbortError");

    const reason = new Error("no longer needed");
    const before = await mem.listMemories({ user_id: `${user}-2` });
    await assert.rejects(
      mem.saveMemory({ user_id: `${user}-2`, content: "Never sent." }, { signal: AbortSignal.abort(reason) }),
      (e: unknown) => e === reason,
    );
    assert.deepEqual(await mem.listMemories({ user_id: `${user}-2` }), before);
  });

  test("a server that is not there is StoreUnreachableError", async () => {
    const nobody = new PortamemClient({ url: "http://127.0.0.1:9", apiKey: key, timeoutMs: 5000 });
    const e = await rejectsWith(nobody.health(), StoreUnreachableError, undefined);
    assert.match(e.message, /cannot reach/);
  });
});
