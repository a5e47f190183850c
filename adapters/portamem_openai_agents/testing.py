"""An offline ``Model`` for the Agents SDK that answers from a script: tests, examples and the conformance driver.

The SDK ships no test model; a ``Model`` subclass is its own way to bring another provider, so
``Agent(model=ScriptedModel([...]))`` runs the real ``Runner`` loop with no provider and no network.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

from ._framework import require

require()

from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

__all__ = ["ScriptedModel", "ToolCall", "Call", "Step"]


@dataclass(frozen=True)
class ToolCall:
    """A step that calls a function tool with ``arguments``."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Call:
    """What one model call received."""

    instructions: str | None
    input: list[TResponseInputItem]


#: one model answer: its text, a tool call, or a function of the call that returns one of those
Step = Union[str, ToolCall, Callable[[Call], Union[str, ToolCall]]]


def _output(step: str | ToolCall) -> Any:
    # fresh ids per answer, as a provider gives them
    if isinstance(step, ToolCall):
        return ResponseFunctionToolCall(type="function_call", id=f"fc_{uuid.uuid4().hex}",
                                        call_id=f"call_{uuid.uuid4().hex}", name=step.name,
                                        arguments=json.dumps(step.arguments))
    return ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=step, annotations=[])])


class ScriptedModel(Model):
    """Answers each call with the next step of ``script`` (the last one repeats) and keeps every call."""

    def __init__(self, script: Iterable[Step]) -> None:
        self.script = list(script)
        self.calls: list[Call] = []

    async def get_response(self, system_instructions: str | None, input: str | list[TResponseInputItem],
                           *args: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        call = Call(system_instructions, items)  # type: ignore[arg-type]
        self.calls.append(call)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        answer = step(call) if callable(step) else step
        return ModelResponse(output=[_output(answer)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("ScriptedModel answers Runner.run and run_sync, not run_streamed")
