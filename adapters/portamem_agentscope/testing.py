"""An offline chat model for AgentScope 2.x that answers from a script: tests, examples and the conformance driver."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Union

from ._framework import require

require(2)

from agentscope.credential import CredentialBase  # noqa: E402
from agentscope.formatter import OpenAIChatFormatter  # noqa: E402
from agentscope.message import Msg, TextBlock  # noqa: E402
from agentscope.model import ChatModelBase, ChatResponse  # noqa: E402

__all__ = ["ScriptedChatModel", "Step"]

#: one model answer: text, content blocks, or a function of the model's input messages
Step = Union[str, list[Any], Callable[[list[Msg]], Union[str, list[Any]]]]


class ScriptedChatModel(ChatModelBase):
    """Answers each call with the next step of ``script`` (the last one repeats) and keeps every input."""

    def __init__(self, script: Iterable[Step]) -> None:
        super().__init__(credential=CredentialBase(), model="scripted", parameters=ChatModelBase.Parameters(),
                         stream=False, max_retries=0)
        self.script = list(script)
        self.inputs: list[list[Msg]] = []
        # Agent reads model.formatter.supported_input_media_types, which ChatModelBase does not declare
        self.formatter = OpenAIChatFormatter()

    async def _call_api(self, model_name: str, messages: list[Msg], tools: list[dict] | None = None,
                        tool_choice: Any = None, **kwargs: Any) -> ChatResponse:
        self.inputs.append([m.model_copy(deep=True) for m in messages])  # the agent keeps filling its reply
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        answer = step(messages) if callable(step) else step
        content = [TextBlock(text=answer)] if isinstance(answer, str) else list(answer)
        return ChatResponse(content=content, is_last=True)

    def saw(self, text: str) -> bool:
        """Whether the latest model input contains ``text`` (in any text or hint block)."""
        return any(text in m.model_dump_json() for m in (self.inputs[-1] if self.inputs else []))
