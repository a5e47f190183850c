// The LangChain.js adapter against a real `portamem serve`: the chat history over the working window and
// the retriever over search.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Document } from "@langchain/core/documents";
import { AIMessage, type BaseMessage, HumanMessage, SystemMessage, ToolMessage } from "@langchain/core/messages";
import { RunnableLambda } from "@langchain/core/runnables";

import { PortamemClient } from "@portamem/client";
import { PortamemChatMessageHistory, PortamemRetriever } from "@portamem/client/langchain";

import { type Served, newUser, startServer } from "./harness.js";

let server: Served;
let client: PortamemClient;

before(async () => {
  server = await startServer();
  client = new PortamemClient({ url: server.url, apiKey: await server.key("acme") });
});

after(async () => {
  await server?.stop();
});

const dicts = (messages: BaseMessage[]) => messages.map((m) => m.toDict());

describe("PortamemChatMessageHistory", () => {
  test("messages come back exactly, through a new history object too", async () => {
    const userId = newUser("history");
    const written = [
      new HumanMessage({ content: "Hi, I'm Dana. 我住在上海。", id: "m1", name: "dana" }),
      new AIMessage({ content: "Hello Dana!", id: "m2", response_metadata: { model: "test" } }),
    ];
    const history = new PortamemChatMessageHistory({ client, userId, sessionId: "chat" });
    await history.addMessages(written);
    assert.deepEqual(dicts(await history.getMessages()), dicts(written));
    const reopened = new PortamemChatMessageHistory({ client, userId, sessionId: "chat" });
    assert.deepEqual(dicts(await reopened.getMessages()), dicts(written));
    assert.deepEqual(
      (await client.context({ user_id: userId, session_id: "chat" })).map((t) => [t.user, t.assistant]),
      [["Hi, I'm Dana. 我住在上海。", "Hello Dana!"]],
    );
  });

  test("a turn with tool calls is one window turn, kept whole", async () => {
    const userId = newUser("tools");
    const written = [
      new SystemMessage("You are a travel agent."),
      new HumanMessage("What's the weather in Lisbon?"),
      new AIMessage({ content: "", tool_calls: [{ name: "weather", args: { city: "Lisbon" }, id: "call-1", type: "tool_call" }] }),
      new ToolMessage({ content: "22°C, sunny", tool_call_id: "call-1", name: "weather" }),
      new AIMessage("It is 22°C and sunny in Lisbon."),
    ];
    const history = new PortamemChatMessageHistory({ client, userId });
    await history.addMessages(written);
    assert.deepEqual(dicts(await history.getMessages()), dicts(written));
    const turns = await client.context({ user_id: userId });
    assert.deepEqual(
      turns.map((t) => [t.user, t.assistant]),
      [["What's the weather in Lisbon?", "It is 22°C and sunny in Lisbon."]],
    );
  });

  test("a turn in progress waits in the object until the reply; a replayed transcript is not stored twice", async () => {
    const userId = newUser("open");
    const history = new PortamemChatMessageHistory({ client, userId });
    await history.addUserMessage("Book me a table for two.");
    assert.deepEqual(await client.context({ user_id: userId }), []);
    assert.deepEqual((await history.getMessages()).map((m) => m.text), ["Book me a table for two."]);
    await history.addAIMessage("Booked for 8pm.");
    assert.equal((await client.context({ user_id: userId })).length, 1);

    const transcript = [new HumanMessage({ content: "And a taxi?", id: "t1" }), new AIMessage({ content: "Taxi at 7:30.", id: "t2" })];
    await history.addMessages(transcript);
    await history.addMessages([...transcript, new HumanMessage({ content: "Thanks!", id: "t3" }), new AIMessage({ content: "Enjoy!", id: "t4" })]);
    assert.deepEqual(
      (await client.context({ user_id: userId })).map((t) => t.user),
      ["Book me a table for two.", "And a taxi?", "Thanks!"],
    );

    await history.clear();
    assert.deepEqual(await history.getMessages(), []);
    assert.deepEqual(await client.context({ user_id: userId }), []);
  });

  test("turns another client wrote are read as human and AI messages", async () => {
    const userId = newUser("foreign");
    await client.addTurn({ user_id: userId, user: "My flight is TP1234.", assistant: "Noted, TP1234." });
    const messages = await new PortamemChatMessageHistory({ client, userId }).getMessages();
    assert.deepEqual(
      messages.map((m) => [m.getType(), m.text]),
      [
        ["human", "My flight is TP1234."],
        ["ai", "Noted, TP1234."],
      ],
    );
  });
});

describe("PortamemRetriever", () => {
  test("documents saved through the retriever are retrieved with their score breakdown", async () => {
    const userId = newUser("retriever");
    const retriever = new PortamemRetriever({ client, userId, k: 2 });
    const ids = await retriever.addDocuments([
      new Document({ pageContent: "Dana's favourite cake is a Basque cheesecake.", metadata: { source: "chat" } }),
      new Document({ pageContent: "Dana's cat is called Miso." }),
    ]);
    assert.equal(ids.length, 2);

    const docs = await retriever.invoke("what cake does Dana like?");
    assert.ok(docs.length >= 1 && docs.length <= 2);
    const top = docs[0]!;
    assert.equal(top.pageContent, "Dana's favourite cake is a Basque cheesecake.");
    assert.equal(top.id, ids[0]);
    assert.ok(top.metadata.score > 0);
    assert.ok(top.metadata.found_by.length > 0);
    assert.ok("vector" in top.metadata.components);
    assert.equal(top.metadata.type, "semantic");
    assert.deepEqual(top.metadata.metadata, { source: "chat" });

    // a retriever is a Runnable: it composes into a chain
    const chain = retriever.pipe(RunnableLambda.from((found: Document[]) => found.map((d) => d.pageContent)));
    assert.equal((await chain.invoke("Dana's cat"))[0], "Dana's cat is called Miso.");
  });

  test("an agent's retriever saves privately and reads its own memories and the shared layer", async () => {
    const userId = newUser("agents");
    await new PortamemRetriever({ client, userId }).addDocuments([new Document({ pageContent: "Dana's office is in Porto." })]);
    const planner = new PortamemRetriever({ client, userId, agentId: "planner" });
    await planner.addDocuments([new Document({ pageContent: "Planner note: Dana's trip to Porto is on 3 June." })]);
    const other = new PortamemRetriever({ client, userId, agentId: "support" });

    const seenByPlanner = (await planner.invoke("Dana Porto")).map((d) => d.pageContent);
    assert.ok(seenByPlanner.includes("Planner note: Dana's trip to Porto is on 3 June."));
    assert.ok(seenByPlanner.includes("Dana's office is in Porto."));
    const seenByOther = (await other.invoke("Dana Porto")).map((d) => d.pageContent);
    assert.deepEqual(seenByOther, ["Dana's office is in Porto."]);
  });
});
