"""Recorded HTTP response bodies -> text: VCR ``body: {string: ...}`` (``!!binary`` bytes decoded by the
recorded ``content-encoding``: gzip, deflate, br, zstd), Ruby VCR ``base64_string``, or a JSON body
stored as an object. Bytes that are not UTF-8 are replaced by U+FFFD with an ``invalid_utf8``
finding, as in a ``.sse`` file (the SSE standard decodes them so)."""

from __future__ import annotations

import base64
import binascii
import gzip
import zlib
from collections.abc import Mapping
from typing import Any

from toolcall_lab.exceptions import UnknownFormatError
from toolcall_lab.formats.base import finding
from toolcall_lab.messages import Finding


def headers_of(raw: Any) -> dict[str, str]:
    """Recorded headers, lower-cased; VCR keeps each value as a list."""
    if not isinstance(raw, Mapping):
        return {}
    return {str(k).lower(): str(v[0] if isinstance(v, list) and v else v) for k, v in raw.items()}


def _decompress(data: bytes, coding: str) -> bytes:
    if coding in ("gzip", "x-gzip"):
        return gzip.decompress(data)
    if coding == "deflate":
        try:
            return zlib.decompress(data)
        except zlib.error:  # raw deflate without the zlib header, as some servers send it
            return zlib.decompress(data, -zlib.MAX_WBITS)
    if coding == "br":
        try:
            import brotli
        except ImportError:
            raise UnknownFormatError(
                "the body is brotli-compressed (content-encoding: br); `pip install brotli` to read it"
            ) from None
        return bytes(brotli.decompress(data))
    if coding == "zstd":
        try:
            from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+
        except ImportError:
            return _zstandard(data)
        return bytes(zstd.decompress(data))
    if coding == "identity":
        return data
    raise UnknownFormatError(f"unknown content-encoding {coding!r} of a binary body")


def _zstandard(data: bytes) -> bytes:
    """zstd before Python 3.14: the `zstandard` package. Every frame is read (a body may hold
    several, as a server that compresses as it streams writes them)."""
    try:
        import zstandard
    except ImportError:
        raise UnknownFormatError(
            "the body is zstd-compressed (content-encoding: zstd); `pip install zstandard` to read it"
        ) from None
    out: list[bytes] = []
    while data:  # one frame after another (a decompressobj stops at the end of the first)
        stream = zstandard.ZstdDecompressor().decompressobj()
        out.append(bytes(stream.decompress(data)))
        if not stream.eof:  # a cut frame decompresses to what it holds, without an error
            raise ValueError(f"the data ends before the end of zstd frame {len(out)}; cut off?")
        data = stream.unused_data
    return b"".join(out)


def decode_bytes(data: bytes, headers: Mapping[str, str]) -> tuple[str, list[Finding]]:
    """Bytes of a recorded body -> text (and findings), undoing each recorded content-encoding in
    reverse order."""
    codings = [c.strip().lower() for c in headers.get("content-encoding", "").split(",") if c.strip()]
    for coding in reversed(codings):
        try:
            data = _decompress(data, coding)
        except (OSError, EOFError, zlib.error) as exc:
            raise UnknownFormatError(f"the body does not decompress as {coding} ({exc})") from None
        except Exception as exc:  # brotli / zstd raise their own error types
            if isinstance(exc, UnknownFormatError):
                raise
            raise UnknownFormatError(f"the body does not decompress as {coding} ({exc})") from None
    if not codings and data[:2] == b"\x1f\x8b":
        raise UnknownFormatError(
            "the body is gzip data but no content-encoding was recorded; cannot tell how it was meant"
        )
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        text = _other_encoding(data, headers)
        if text is not None:
            return text, []
        undone = f" after undoing content-encoding {', '.join(codings)}" if codings else ""
        note = finding(
            "invalid_utf8",
            f"the body holds bytes that are not UTF-8{undone} (first at byte {exc.start}); "
            "replaced by U+FFFD",
        )
        return data.decode("utf-8", "replace"), [note]


def _other_encoding(data: bytes, headers: Mapping[str, str]) -> str | None:
    """Bytes that are not UTF-8, read as what they say they are: UTF-16 with its byte order mark
    (JSON readers such as httpx's detect it), else the ``charset`` of the recorded content-type."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    for part in headers.get("content-type", "").split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            try:
                return data.decode(value.strip().strip('"'))
            except (LookupError, UnicodeDecodeError):
                return None
    return None


def decode_body(body: Any, headers: Mapping[str, str]) -> tuple[Any, list[Finding]]:
    """A recorded body as text or a JSON object (None when absent), and findings about decoding it."""
    if isinstance(body, Mapping) and ("string" in body or "base64_string" in body):
        if "base64_string" in body:
            try:
                raw: Any = base64.b64decode(str(body["base64_string"]), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise UnknownFormatError(f"the body's base64_string is not base64 ({exc})") from None
        else:
            raw = body["string"]
        return decode_bytes(bytes(raw), headers) if isinstance(raw, bytes | bytearray) else (raw, [])
    if isinstance(body, bytes | bytearray):
        return decode_bytes(bytes(body), headers)
    return body, []
