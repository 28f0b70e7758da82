"""Tool calls in replies: a registry of tool services and two parsers (XML blocks, JSON calls).

These only read text and look names up; running a tool is the caller's business (the
Python tool, :class:`~rl_llm.PythonInterpreter`, runs code in :mod:`rl_llm.sandbox`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict


class ToolService(Protocol):
    """A tool: a ``name``, input / output schemas, and a call taking keyword arguments."""

    name: str
    schema_in: dict[str, Any]
    schema_out: dict[str, Any]

    def __call__(self, **kwargs: Any) -> dict[str, Any]: ...


@dataclass
class ToolCall:
    """One call a reply asks for: the tool's name, its arguments and an optional tag."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    tag: str | None = None


class ParseResult(TypedDict):
    """What a parser returns: the reply's text without tool blocks, the calls in order, metadata."""

    text: str
    calls: list[ToolCall]
    meta: dict[str, Any]


class ToolRegistry:
    """Tool services by name.

    Args:
        services: services to register (each has a ``name``).

    Raises:
        KeyError: from :meth:`get`, for a name nobody registered.

    Examples:
        >>> class Add:
        ...     name, schema_in, schema_out = "add", {"a": int, "b": int}, {"sum": int}
        ...     def __call__(self, a, b, **kwargs):
        ...         return {"sum": a + b}
        >>> ToolRegistry([Add()]).get("add")(a=1, b=2)
        {'sum': 3}
    """

    def __init__(self, services: Iterable[ToolService] = ()) -> None:
        self._services: dict[str, ToolService] = {}
        for service in services:
            self.register(service)

    def register(self, service: ToolService) -> None:
        """Adds (or replaces) the service under its ``name``."""
        self._services[service.name] = service

    def get(self, name: str) -> ToolService:
        """The service called ``name``."""
        try:
            return self._services[name]
        except KeyError:
            raise KeyError(
                f"Unknown tool: {name}. Registered tools: {sorted(self._services)}; add it with "
                "ToolRegistry.register(service)."
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._services

    def __len__(self) -> int:
        return len(self._services)


_TOOL_BLOCK = re.compile(
    r'<tool\s+name="(?P<name>[^"]+)"(?:\s+tag="(?P<tag>[^"]*)")?\s*>(?P<body>.*?)</tool>',
    re.DOTALL,
)


def _result(text: str, calls: list[ToolCall]) -> ParseResult:
    return ParseResult(text=text, calls=calls, meta={"count": len(calls)})


class XMLBlockParser:
    """Reads ``<tool name="search" tag="A">{"query": "x"}</tool>`` blocks from a reply.

    Each block becomes a :class:`ToolCall` (in order of appearance) and is removed from the
    text. The body is JSON arguments; an empty body means no arguments and a body that
    is not a JSON object is passed as ``{"raw": body}``.

    Examples:
        >>> out = XMLBlockParser()('Let me look. <tool name="search" tag="A">{"q": "rl"}</tool>')
        >>> out["text"], out["calls"][0]
        ('Let me look.', ToolCall(tool='search', args={'q': 'rl'}, tag='A'))
    """

    def __call__(self, response: str | dict[str, Any]) -> ParseResult:
        """Parses ``response`` (a string, or a dict holding it under ``"text"``)."""
        text = response if isinstance(response, str) else str(response.get("text", ""))
        calls: list[ToolCall] = []

        def take(match: re.Match[str]) -> str:
            body = match.group("body").strip()
            try:
                args = json.loads(body) if body else {}
            except json.JSONDecodeError:
                args = {"raw": body}
            if not isinstance(args, dict):
                args = {"raw": body}
            calls.append(ToolCall(match.group("name"), args, match.group("tag")))
            return ""

        return _result(_TOOL_BLOCK.sub(take, text).strip(), calls)


class JSONCallParser:
    """Reads function-calling replies: ``{"message": "...", "tools": [{"tool": ..., "args": ..., "tag": ...}]}``.

    A string that is not JSON is plain text without calls.

    Raises:
        ValueError: for a tool entry without a ``"tool"`` name.

    Examples:
        >>> out = JSONCallParser()({"message": "hi", "tools": [{"tool": "search", "args": {"q": "rl"}}]})
        >>> out["text"], out["calls"][0].tool
        ('hi', 'search')
    """

    def __call__(self, response: str | dict[str, Any]) -> ParseResult:
        """Parses ``response`` (a dict or its JSON text)."""
        if isinstance(response, str):
            try:
                decoded = json.loads(response)
            except json.JSONDecodeError:
                return _result(response, [])
            if not isinstance(decoded, dict):
                return _result(response, [])
            response = decoded
        calls = []
        for i, entry in enumerate(response.get("tools") or []):
            if not isinstance(entry, dict) or "tool" not in entry:
                raise ValueError(
                    f"JSONCallParser: tools[{i}] must be a dict with a 'tool' name (and optional "
                    f"'args', 'tag'), got {entry!r}."
                )
            calls.append(ToolCall(entry["tool"], dict(entry.get("args") or {}), entry.get("tag")))
        return _result(str(response.get("message", "")), calls)
