"""The serialized proxy: hand a ``parallel_tool_calls: false`` client one tool call per round trip.

- `session`: `SerializedSession`, the in-process state machine of one batch (the run loop's serialized
  mode uses it).
- `ids`: the call ids the HTTP proxy hands out (opaque, at most 33 characters: a batch tag, position
  and size; the upstream's ids are kept in the batch record and its tombstone).
- `batches`: what the HTTP proxy remembers of a batch, and how a client's messages are read back into
  batches and merged into the upstream's form.
- `store`: batches in memory or in SQLite (``--state FILE``), bounded by count and bytes, with expiry.
- `settings`: `ProxySettings` (validated on creation) and the locks concurrent requests wait on.
- `server`: `ProxyServer`, the OpenAI-compatible HTTP server; its docstring describes how first
  requests, retries, continuations, conflicts, expired and interrupted batches are recognised
  (`_forward`: its side of the upstream, errors and reply rendering; `_httpd`: the lean HTTP/1.1
  server it answers clients with).
- `upstreams`: `HTTPUpstream` (raw pooled pass-through to a real endpoint over `_http`, a lean
  HTTP/1.1 client), `TraceUpstream` (a recorded trace), `upstream_app` / `serve` (aiohttp, for
  serving a trace as a plain endpoint).
"""

from typing import TYPE_CHECKING

from toolcall_lab.proxy.session import SerializedSession, hand_out_message

if TYPE_CHECKING:
    from toolcall_lab.proxy.server import ProxyServer
    from toolcall_lab.proxy.settings import ProxySettings
    from toolcall_lab.proxy.upstreams import (
        HTTPUpstream,
        TraceUpstream,
        Upstream,
        UpstreamError,
        serve,
        upstream_app,
    )

__all__ = [
    "HTTPUpstream",
    "ProxyServer",
    "ProxySettings",
    "SerializedSession",
    "TraceUpstream",
    "Upstream",
    "UpstreamError",
    "hand_out_message",
    "serve",
    "upstream_app",
]


def __getattr__(name: str) -> object:
    """The server and upstreams import aiohttp; load them only when asked for (the loop needs none)."""
    if name == "ProxyServer":
        from toolcall_lab.proxy import server

        return server.ProxyServer
    if name == "ProxySettings":
        from toolcall_lab.proxy import settings

        return settings.ProxySettings
    if name in ("HTTPUpstream", "TraceUpstream", "Upstream", "UpstreamError", "serve", "upstream_app"):
        from toolcall_lab.proxy import upstreams

        return getattr(upstreams, name)
    raise AttributeError(f"module 'toolcall_lab.proxy' has no attribute {name!r}")
