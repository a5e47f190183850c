// portamem as a LangChain.js chat history and retriever:
//   PORTAMEM_URL=http://127.0.0.1:8765 PORTAMEM_API_KEY=pm_... node examples/langchain.js
import { Document } from "@langchain/core/documents";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { RunnableLambda } from "@langchain/core/runnables";

import { PortamemClient } from "@portamem/client";
import { PortamemChatMessageHistory, PortamemRetriever } from "@portamem/client/langchain";

const client = new PortamemClient({ url: process.env["PORTAMEM_URL"] ?? "http://127.0.0.1:8765", retries: 6 });

// the conversation lives in portamem's working window, readable from Python adapters too
const history = new PortamemChatMessageHistory({ client, userId: "dana", sessionId: "chat-1" });
await history.addMessages([new HumanMessage("I'm flying to Lisbon on the 12th."), new AIMessage("Noted!")]);
console.log((await history.getMessages()).map((m) => `${m.getType()}: ${m.text}`));

// long-term memories, retrieved with their score breakdown
const retriever = new PortamemRetriever({ client, userId: "dana", k: 3 });
await retriever.addDocuments([new Document({ pageContent: "Dana prefers window seats." })]);
const context = retriever.pipe(RunnableLambda.from((docs: Document[]) => docs.map((d) => d.pageContent).join("\n")));
console.log(await context.invoke("which seat does Dana like?"));
