"""An offline chat model for AgentScope 1.x that answers from a script: tests, examples and the conformance driver."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Union

from agentscope.message import TextBlock
from agentscope.model import ChatModelBase, ChatResponse

__all__ = ["ScriptedChatModel", "Step"]

#: one model answer: text, content blocks, or a function of the formatted prompt
Step = Union[str, list[Any], Callable[[list[dict]], Union[str, list[Any]]]]


class ScriptedChatModel(ChatModelBase):
    """Answers each call with the next step of ``script`` (the last one repeats) and keeps every prompt.

    1.x models receive the formatter's output (OpenAI-shaped dicts), not ``Msg`` objects.
    """

    def __init__(self, script: Iterable[Step]) -> None:
        super().__init__(model_name="scripted", stream=False)
        self.script = list(script)
        self.prompts: list[list[dict]] = []

    async def __call__(self, messages: list[dict], tools: Any = None, tool_choice: Any = None,
                       **kwargs: Any) -> ChatResponse:
        self.prompts.append(list(messages))
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        answer = step(messages) if callable(step) else step
        content = [TextBlock(type="text", text=answer)] if isinstance(answer, str) else list(answer)
        return ChatResponse(content=content)

    def saw(self, text: str) -> bool:
        """Whether the latest prompt contains ``text``."""
        return bool(self.prompts) and text in json.dumps(self.prompts[-1], ensure_ascii=False)
