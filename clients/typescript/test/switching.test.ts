// The switching contract across languages: what the LangChain.js adapter writes is recalled unchanged through
// Python's LangChain and LlamaIndex adapters, and what they write is recalled unchanged through LangChain.js,
// all on one real `portamem serve`. The Python half is test/python/switching.py.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { Document } from "@langchain/core/documents";
import { AIMessage, HumanMessage } from "@langchain/core/messages";

import { PortamemClient } from "@portamem/client";
import { PortamemChatMessageHistory, PortamemRetriever } from "@portamem/client/langchain";

import { PACKAGE_ROOT, type Served, newUser, python, startServer } from "./harness.js";

let server: Served;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

interface PythonSaw {
  langchain: { recall: string[]; messages: Array<{ type: string; text: string; name: string | null; id: string | null }> };
  llamaindex: { recall: string[]; messages: Array<{ role: string; text: string }> };
}

/** Run the Python half with `job` on stdin; what it printed as JSON. */
function runPython(job: unknown): Promise<PythonSaw> {
  return new Promise((resolve, reject) => {
    const proc = spawn(python(), [join(PACKAGE_ROOT, "test", "python", "switching.py")], { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    proc.stdout.on("data", (d: Buffer) => (out += d.toString("utf-8")));
    proc.stderr.on("data", (d: Buffer) => (err += d.toString("utf-8")));
    proc.on("error", reject);
    proc.on("exit", (code) => {
      if (code !== 0) return reject(new Error(`the Python half exited with ${code}:\n${err}`));
      resolve(JSON.parse(out.trim().split("\n").pop()!) as PythonSaw);
    });
    proc.stdin.end(JSON.stringify(job));
  });
}

test("memory crosses between LangChain.js and Python's LangChain and LlamaIndex, both ways, unchanged", async () => {
  const key = await server.key("switching");
  const client = new PortamemClient({ url: server.url, apiKey: key });
  const userId = newUser("dana");

  // LangChain.js writes a memory and a turn
  const fromJs = {
    memory: "Dana is allergic to hazelnuts 🌰 and carries her own snacks on trips to 上海.",
    user: "I'm flying to Lisbon on the twelfth ✈️, window seat please.",
    assistant: "Noted: Lisbon on the twelfth, window seat.",
  };
  await new PortamemRetriever({ client, userId }).addDocuments([new Document({ pageContent: fromJs.memory })]);
  await new PortamemChatMessageHistory({ client, userId, sessionId: "from-js" }).addMessages([
    new HumanMessage({ content: fromJs.user, name: "dana", id: "js-1" }),
    new AIMessage({ content: fromJs.assistant, id: "js-2" }),
  ]);

  // Python's LangChain and LlamaIndex adapters recall it, and write their own
  const fromLangChain = {
    session_id: "from-langchain",
    memory: "Dana's running club meets in Parque Eduardo VII every Sunday 🏃.",
    user: "Book the early train to Porto, 拜托.",
    assistant: "Booked: the early train to Porto.",
  };
  const fromLlamaIndex = {
    session_id: "from-llamaindex",
    memory: "Dana's daughter plays the cello in the Gulbenkian youth orchestra 🎻.",
    user: "Order oat milk, 两升.",
    assistant: "Ordered two litres of oat milk.",
  };
  const saw = await runPython({
    url: server.url,
    key,
    user_id: userId,
    read: { memory: fromJs.memory, session_id: "from-js" },
    write: { langchain: fromLangChain, llamaindex: fromLlamaIndex },
  });

  assert.equal(saw.langchain.recall[0], fromJs.memory);
  assert.equal(saw.llamaindex.recall[0], fromJs.memory);
  assert.deepEqual(saw.langchain.messages, [
    { type: "human", text: fromJs.user, name: "dana", id: "js-1" },
    { type: "ai", text: fromJs.assistant, name: null, id: "js-2" },
  ]);
  assert.deepEqual(saw.llamaindex.messages, [
    { role: "user", text: fromJs.user },
    { role: "assistant", text: fromJs.assistant },
  ]);

  // LangChain.js recalls what the Python adapters wrote
  const retriever = new PortamemRetriever({ client, userId, k: 3 });
  for (const written of [fromLangChain, fromLlamaIndex]) {
    const docs = await retriever.invoke(written.memory);
    assert.equal(docs[0]?.pageContent, written.memory);
    const messages = await new PortamemChatMessageHistory({ client, userId, sessionId: written.session_id }).getMessages();
    assert.deepEqual(
      messages.map((m) => [m.getType(), m.text]),
      [
        ["human", written.user],
        ["ai", written.assistant],
      ],
    );
  }
});
