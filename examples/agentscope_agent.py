"""An AgentScope 2.x ``Agent`` with the portamem middleware: what one run learns, a later run recalls.

    python examples/agentscope_agent.py [store-dir]

Offline by default (a stand-in model that quotes the memories it is shown). For a real model set
PORTAMEM_EXAMPLE_MODEL=gpt-4o-mini and OPENAI_API_KEY (and OPENAI_BASE_URL for a compatible server).
"""

from __future__ import annotations

import asyncio
import os

from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit
from offline_models import MODEL_ENV, offline_answer, two_runs
from portamem_agentscope import PortamemMiddleware
from portamem_agentscope.testing import ScriptedChatModel

from portamem import Memory

USER = "alice"


def _offline(messages: list[Msg]) -> str:
    hints = [b.hint for m in messages for b in m.get_content_blocks("hint") if isinstance(b.hint, str)]
    # the agent's reply in progress is the last message, so the question is the last user message
    earlier = [m.get_text_content() or "" for m in messages if m.role == "user" and m.get_text_content()][:-1]
    said = " Earlier you said: " + " | ".join(earlier) if earlier else ""
    return offline_answer("\n".join(hints)) + said


def model() -> ChatModelBase:
    """The real model named by PORTAMEM_EXAMPLE_MODEL, or the offline stand-in."""
    name = os.environ.get(MODEL_ENV)
    if name:
        from agentscope.credential import OpenAICredential
        from agentscope.model import OpenAIChatModel

        credential = OpenAICredential(api_key=os.environ["OPENAI_API_KEY"], base_url=os.environ.get("OPENAI_BASE_URL"))
        return OpenAIChatModel(credential=credential, model=name, stream=False)
    return ScriptedChatModel([_offline])


async def ask(memory: Memory, question: str, session: str) -> str:
    mw = PortamemMiddleware(memory, user_id=USER, session_id=session, mode="both")
    agent = Agent(name="Friday", system_prompt="You are a helpful assistant. Use the memories you are given.",
                  model=model(), toolkit=Toolkit(tools=await mw.list_tools()), middlewares=[mw])
    reply = await agent.reply(UserMsg(name=USER, content=question))
    return reply.get_text_content() or ""


if __name__ == "__main__":
    asyncio.run(two_runs(ask, "agentscope"))
