"""The Python half of the cross-language switching test (driven by ``test/switching.test.ts``).

Reads one JSON job on stdin: the server's ``url`` and ``key``, the ``user_id``, what the LangChain.js
adapter wrote (``read``) and what to write here (``write``). Through a ``RemoteMemory`` on that server it
recalls the JavaScript side's memory and window through LangChain's and LlamaIndex's portamem adapters,
writes a memory and a turn through each of them, and prints what it saw as one JSON line.
"""

from __future__ import annotations

import json
import sys

from langchain_core.messages import AIMessage, HumanMessage
from llama_index.core.base.llms.types import ChatMessage, MessageRole

from portamem.client import RemoteMemory
from portamem_langchain import PortamemChatMessageHistory, PortamemRetriever, PortamemStore
from portamem_llamaindex import PortamemMemory, PortamemToolSpec
from portamem_llamaindex import PortamemRetriever as LlamaRetriever


def main() -> None:
    job = json.loads(sys.stdin.read())
    user, read, write = job["user_id"], job["read"], job["write"]
    mem = RemoteMemory(job["url"], job["key"])
    try:
        lc_history = PortamemChatMessageHistory(mem, user_id=user, session_id=read["session_id"])
        li_history = PortamemMemory(mem, user_id=user, session_id=read["session_id"])
        seen = {
            "langchain": {
                "recall": [d.page_content for d in PortamemRetriever(memory=mem, user_id=user).invoke(read["memory"], k=3)],
                "messages": [{"type": m.type, "text": m.text, "name": m.name, "id": m.id} for m in lc_history.messages],
            },
            "llamaindex": {
                "recall": [n.node.get_content() for n in LlamaRetriever(mem, user_id=user, similarity_top_k=3).retrieve(read["memory"])],
                "messages": [{"role": m.role.value, "text": m.content} for m in li_history.get_all()],
            },
        }

        lc = write["langchain"]
        PortamemStore(mem).put(("memories", user), "running-club", {"content": lc["memory"]})
        PortamemChatMessageHistory(mem, user_id=user, session_id=lc["session_id"]).add_messages(
            [HumanMessage(lc["user"]), AIMessage(lc["assistant"])])

        li = write["llamaindex"]
        tools = {t.metadata.name: t for t in PortamemToolSpec(mem, user_id=user, session_id=li["session_id"]).to_tool_list()}
        tools["save_memory"].call(content=li["memory"])
        PortamemMemory(mem, user_id=user, session_id=li["session_id"]).put_messages(
            [ChatMessage(role=MessageRole.USER, content=li["user"]),
             ChatMessage(role=MessageRole.ASSISTANT, content=li["assistant"])])
    finally:
        mem.close()
    print(json.dumps(seen, ensure_ascii=False))


if __name__ == "__main__":
    main()
