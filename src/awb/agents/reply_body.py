"""An HTTP reply's body, read decoded up to a cap, holding no more than the cap even when it came compressed.

httpx inflates each chunk of a compressed body whole before a caller sees it: one 64 KB chunk of gzip is up to
64 MB decoded (a 1 GB gzip bomb took a provider call from 48 to 181 MB with a 32 MB cap), and a `br` or `zstd`
chunk, which httpx decodes when their libraries are installed, far more. Here a reply is asked for in gzip,
deflate or none, inflated only as far as the cap, and refused in any other encoding.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import httpx

#: What to send as `Accept-Encoding`: the encodings `read_capped` inflates within its cap.
ACCEPTED_ENCODINGS = "gzip, deflate"
#: How much is inflated at once.
_PIECE = 64 * 1024


class BodyRefused(Exception):
    """A body over the cap, or in an encoding that was not asked for; the message completes "the reply is ..."."""


class _Inflater:
    """gzip or deflate (zlib-wrapped, or raw as some servers send it, as httpx takes it), `limit` bytes at most."""

    def __init__(self, encoding: str) -> None:
        self.raw_fallback = encoding == "deflate"
        self.decoder = zlib.decompressobj(zlib.MAX_WBITS | 16 if encoding == "gzip" else zlib.MAX_WBITS)
        self.started = False

    def inflate(self, data: bytes) -> Iterator[bytes]:
        """`data` inflated, `_PIECE` bytes at a time."""
        try:
            out = self.decoder.decompress(data, _PIECE)
        except zlib.error:
            if not (self.raw_fallback and not self.started):
                raise
            self.decoder, self.raw_fallback = zlib.decompressobj(-zlib.MAX_WBITS), False
            out = self.decoder.decompress(data, _PIECE)
        self.started = True
        yield out
        while self.decoder.unconsumed_tail:
            yield self.decoder.decompress(self.decoder.unconsumed_tail, _PIECE)


async def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The body of a streamed `response`, decoded, or `BodyRefused` once it passes `limit` bytes (what is held
    meanwhile: at most `limit` bytes, one chunk as it came over the wire and 64 KB inflated from it)."""
    encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",")]
    encodings = [e for e in encodings if e not in ("", "identity")]
    if len(encodings) > 1 or (encodings and encodings[0] not in ("gzip", "deflate")):
        raise BodyRefused(f"{', '.join(encodings)}-encoded, where {ACCEPTED_ENCODINGS} or none was asked for")
    inflater = _Inflater(encodings[0]) if encodings else None
    body = bytearray()
    try:
        async for chunk in response.aiter_raw():
            for piece in (chunk,) if inflater is None else inflater.inflate(chunk):
                body += piece
                if len(body) > limit:
                    raise BodyRefused(f"over the {limit}-byte limit")
        if inflater is not None:
            body += inflater.decoder.flush()
    except zlib.error as err:
        raise httpx.DecodingError(f"the reply's {encodings[0]} body cannot be decoded: {err}") from None
    if len(body) > limit:
        raise BodyRefused(f"over the {limit}-byte limit")
    return bytes(body)
