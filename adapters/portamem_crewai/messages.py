"""CrewAI's chat messages (``LLMMessage`` dicts) to and from portamem's ``Message``, and a session's conversation."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from crewai.utilities.types import LLMMessage

from portamem import Memory
from portamem.errors import UnsupportedContentError, ValidationError
from portamem.messages import Message, aadd_messages, add_messages, awindow_messages, window_messages

__all__ = ["FRAMEWORK", "from_llm_message", "to_llm_message", "to_llm_messages", "PortamemConversation"]

FRAMEWORK = "crewai"

#: the mime type named for an attached file that does not say its own
_UNKNOWN_MIME = "application/octet-stream"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: their text, one per line
        return "\n".join(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str))
    return ""


def _mime(files: Any) -> str:
    values = files.values() if isinstance(files, dict) else files if isinstance(files, list) else [files]
    for f in values:
        for attr in ("content_type", "mime_type"):
            if isinstance(kind := getattr(f, attr, None), str) and kind:
                return kind
    return _UNKNOWN_MIME


def from_llm_message(message: LLMMessage | dict[str, Any]) -> Message:
    """The neutral form; the message's keys ride along as JSON so CrewAI gets the same dict back.

    Attached files (``files``: CrewAI's ``FileInput`` objects) are refused with
    ``UnsupportedContentError``, as AutoGen's images are: a memory is text, so describe the file in the
    content. Any other key whose value is not JSON (a provider's raw tool-call parts as objects) is
    refused with ``ValidationError`` naming it. Either fails before anything is written."""
    if not isinstance(message, dict):
        raise ValidationError(f"a CrewAI message is a dict (LLMMessage), got {type(message).__name__}")
    if message.get("files"):
        files = message["files"]
        names = ", ".join(map(str, files)) if isinstance(files, dict) else type(files).__name__
        raise UnsupportedContentError(
            f"a CrewAI message's attached files ({names}) are not kept: portamem keeps text; put what the "
            "file says, or a description of it, in the message's content", _mime(files))
    native = {k: v for k, v in message.items() if k != "files"}
    for key, value in native.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"a CrewAI message's {key!r} holds {type(value).__name__}, which portamem cannot "
                                  f"keep as JSON ({exc}); leave the key out or pass it as JSON values") from exc
    return Message(
        role=message.get("role", ""),
        text=_text(message.get("content")),
        name=message.get("name") if isinstance(message.get("name"), str) else None,
        calls_tools=bool(message.get("tool_calls")),
        framework=FRAMEWORK,
        native=native,
    )


def to_llm_message(message: Message) -> LLMMessage:
    """The dict back: as CrewAI wrote it, or built from role, text and name."""
    if message.framework == FRAMEWORK and message.native is not None:
        return dict(message.native)  # type: ignore[return-value]
    out: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.name:
        out["name"] = message.name
    return out  # type: ignore[return-value]


def to_llm_messages(messages: Iterable[Message]) -> list[LLMMessage]:
    """Messages for ``Agent.kickoff``. Another framework's tool calls and results are left out: without
    their call ids a model API rejects them, and the reply text carries the outcome."""
    return [
        to_llm_message(m) for m in messages
        if m.framework == FRAMEWORK or (m.role != "tool" and not m.calls_tools and m.text.strip())
    ]


class PortamemConversation:
    """One session's conversation in portamem's working window, in CrewAI's message form.

    ``kickoff(agent, text)`` runs ``agent.kickoff`` on the history plus the new message and writes the
    exchange back; ``messages()`` and ``add(...)`` are the two halves, for code that calls kickoff itself.
    """

    def __init__(self, memory: Memory, *, user_id: str, session_id: str = "default",
                 tenant_id: str | None = None) -> None:
        self.memory = memory
        self.user_id = user_id
        self.session_id = session_id
        self.tenant_id = tenant_id

    def _scope(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "session_id": self.session_id, "tenant_id": self.tenant_id}

    def messages(self) -> list[LLMMessage]:
        """The window's messages, oldest first."""
        return to_llm_messages(window_messages(self.memory, **self._scope()))

    def add(self, messages: Iterable[LLMMessage | dict[str, Any]]) -> list[LLMMessage]:
        """Append finished turns (a user message up to the final reply); returns the unfinished rest, unwritten."""
        rest = add_messages(self.memory, [from_llm_message(m) for m in messages], **self._scope())
        return [to_llm_message(m) for m in rest]

    def kickoff(self, agent: Any, text: str) -> Any:
        """``agent.kickoff`` with the session's history before ``text``; the exchange is then recorded."""
        output = agent.kickoff([*self.messages(), {"role": "user", "content": text}])
        self.add([{"role": "user", "content": text}, {"role": "assistant", "content": output.raw}])
        return output

    async def amessages(self) -> list[LLMMessage]:
        return to_llm_messages(await awindow_messages(self.memory, **self._scope()))

    async def aadd(self, messages: Iterable[LLMMessage | dict[str, Any]]) -> list[LLMMessage]:
        rest = await aadd_messages(self.memory, [from_llm_message(m) for m in messages], **self._scope())
        return [to_llm_message(m) for m in rest]

    async def akickoff(self, agent: Any, text: str) -> Any:
        """Async twin of :meth:`kickoff` (``agent.kickoff_async``)."""
        output = await agent.kickoff_async([*await self.amessages(), {"role": "user", "content": text}])
        await self.aadd([{"role": "user", "content": text}, {"role": "assistant", "content": output.raw}])
        return output
