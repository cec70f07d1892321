"""Adapter over the real ``openai.AsyncOpenAI`` client: any OpenAI-compatible endpoint, streamed.

Chunks are passed on as the dicts the server sent (``chunk.to_dict()``), so the loop's own
accumulator and findings apply to real providers exactly as to recordings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from toolcall_lab.models import ModelRequest
from toolcall_lab.runs import TOOL_ONLY_PARAMS


class OpenAIModel:
    """Stream chat completions through an ``openai.AsyncOpenAI`` client.

    Args:
        model: the model name sent upstream.
        client: an ``AsyncOpenAI`` (default: one built from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``).
        parallel_tool_calls: passed through when not None (many servers ignore it).
        stream: False asks for whole responses (yielded as one ``chat.completion`` body).
        params: other request parameters (temperature, ...).
    """

    def __init__(
        self,
        model: str,
        client: Any = None,
        *,
        parallel_tool_calls: bool | None = None,
        stream: bool = True,
        **params: Any,
    ) -> None:
        if client is None:
            from openai import AsyncOpenAI

            client = AsyncOpenAI()
        self.name = model
        self.client = client
        self.parallel_tool_calls = parallel_tool_calls
        self.streaming = stream
        self.params = params

    def request_kwargs(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.name,
            "messages": list(request.messages),
            **self.params,
            **dict(request.params),
        }
        if request.tools:
            kwargs["tools"] = list(request.tools)
            if self.parallel_tool_calls is not None:
                kwargs["parallel_tool_calls"] = self.parallel_tool_calls
        else:  # the API rejects tool-only parameters in a request without tools
            for name in TOOL_ONLY_PARAMS:
                kwargs.pop(name, None)
        if self.streaming:
            kwargs["stream"] = True
            kwargs.setdefault("stream_options", {"include_usage": True})
        return kwargs

    async def stream(self, request: ModelRequest) -> AsyncIterator[dict[str, Any]]:
        response = await self.client.chat.completions.create(**self.request_kwargs(request))
        if not self.streaming:
            yield response.to_dict(mode="json")
            return
        async for chunk in response:
            yield chunk.to_dict(mode="json")

    def __repr__(self) -> str:
        return f"OpenAIModel({self.name!r}, base_url={str(getattr(self.client, 'base_url', ''))!r})"
