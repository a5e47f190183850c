"""A CrewAI crew with portamem memory: what one run learns, a later run recalls.

    python examples/crewai_agent.py [store-dir]

Run 1 chats with an agent (``PortamemConversation`` writes the turn to portamem, whose formation keeps
the fact); run 2 is a crew whose ``Memory`` is portamem (``crew_memory``): CrewAI recalls into the
task's prompt and saves the crew's output. Offline by default (a stand-in model that quotes the memories
it is shown). For a real model set PORTAMEM_EXAMPLE_MODEL=gpt-4o-mini and OPENAI_API_KEY.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from offline_models import MODEL_ENV  # noqa: E402
from portamem_crewai import PortamemConversation, crew_memory  # noqa: E402

from portamem import Memory  # noqa: E402

USER = "alice"


class OfflineLLM(BaseLLM):
    """Quotes the memories CrewAI put in its prompt ("- (score=0.52) ..."), so the output shows them."""

    def __init__(self, **data: Any) -> None:
        super().__init__(**{"model": "offline", **data})

    def call(self, messages: Any, *args: Any, **kwargs: Any) -> str:
        prompt = "\n".join(str(m.get("content")) for m in messages) if isinstance(messages, list) else messages
        memories = re.findall(r"^- \(score=[0-9.]+\) (.*)$", prompt, re.M)
        text = ("(offline model) From memory: " + " | ".join(memories) if memories
                else "(offline model) I have no memories about this yet.")
        return f"Final Answer: {text}"


def llm() -> Any:
    return os.environ.get(MODEL_ENV) or OfflineLLM()


def agent() -> Agent:
    return Agent(role="Assistant", goal="Help the user, using what you remember.", backstory="Attentive.",
                 llm=llm())


def main(path: str) -> None:
    with Memory(path) as memory:  # run 1: a chat; the turn goes to portamem's window
        chat = PortamemConversation(memory, user_id=USER, session_id="monday")
        print("run 1 bot:", chat.kickoff(agent(), "Remember that I am allergic to peanuts.").raw)
    with Memory(path) as memory:  # run 2: reopened, a crew whose memory is portamem
        task = Task(description="Can I eat peanut butter?", expected_output="A short answer.", agent=agent())
        crew = Crew(agents=[task.agent], tasks=[task], memory=crew_memory(memory, user_id=USER))
        print("run 2 bot:", crew.kickoff().raw)
        crew.memory.close()  # wait for CrewAI's background save of the crew's output


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="portamem-crewai-"))
