"""The web panel's sign-ins that ended before their pass expired (Sign out), shared by the server's HTTP
guard and the panel, and the end of every long response (the event stream) let in with one of them.

A pass (`awb.panel_access`) is checked by its HMAC alone, so Sign out could only ask the browser to forget
it: a copy (another tab's event stream, a cookie taken from a shared machine) stayed good for its 12
hours. The server now remembers each pass signed out until the pass expires, and ends the streams it
opened the moment it is signed out, or expires. Kept in memory: the server that signed it out knows.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from awb.panel_access import pass_expiry, pass_id

#: Where the guard leaves the server's sign-outs in each request's ASGI scope, for the panel.
SCOPE_KEY = "awb.sign_outs"
#: Passes remembered as signed out at once (the oldest sign-out is forgotten past it). Only a person
#: who has the token can sign in, so only they could fill it, and they have no need to.
MAX_SIGNED_OUT = 10_000


class StreamSignIn:
    """The sign-in a long response was let in with: `ended()` once it is signed out or its pass has
    expired; a wait inside `bounded()` is cut short the moment it ends."""

    def __init__(self, key: str | None, expires: float | None) -> None:
        #: The pass's id (`panel_access.pass_id`); None for the bearer token, or when no token is configured:
        #: nothing signs those out while the server runs (it reads its token once, at start).
        self.key = key
        self.expires = expires
        self._over = False
        self._lock = threading.Lock()
        self._waits: list[tuple[asyncio.AbstractEventLoop, anyio.CancelScope]] = []

    def ended(self) -> bool:
        """Whether this sign-in would be refused for a new request now."""
        return self._over or (self.expires is not None and time.time() >= self.expires)

    def end(self) -> None:
        """Signed out: every wait inside `bounded()` returns now, from whichever thread this is called."""
        with self._lock:
            self._over = True
            waits = list(self._waits)
        for loop, scope in waits:
            try:
                loop.call_soon_threadsafe(scope.cancel)
            except RuntimeError:  # that loop has closed: its wait is gone with it
                pass

    @contextmanager
    def bounded(self) -> Iterator[None]:
        """Cut the wait inside short when this sign-in ends: at once when signed out, when its pass expires."""
        left = math.inf if self.expires is None else self.expires - time.time()
        scope = anyio.CancelScope(deadline=anyio.current_time() + max(left, 0.0))
        entry = (asyncio.get_running_loop(), scope)
        with self._lock:
            if self._over:
                scope.cancel()
            self._waits.append(entry)
        try:
            with scope:
                yield
        finally:
            with self._lock:
                self._waits.remove(entry)


class SignOuts:
    """The passes signed out on this server that have not expired yet, and the streams open on each pass."""

    def __init__(self, max_passes: int = MAX_SIGNED_OUT) -> None:
        self.max_passes = max_passes
        self._signed_out: dict[str, int] = {}  # pass id -> its expiry, in the order they were signed out
        self._streams: dict[str, set[StreamSignIn]] = {}
        # The guard runs on the event loop, and a panel served by another server may run handlers in threads.
        self._lock = threading.Lock()

    def sign_out(self, presented: str) -> None:
        """End the sign-in of `presented`, a pass `pass_ok` took: refused from now on, its streams ended."""
        key, expires = pass_id(presented), pass_expiry(presented) or 0
        now = time.time()
        with self._lock:
            for gone in [known for known, until in self._signed_out.items() if until <= now]:
                del self._signed_out[gone]
            self._signed_out[key] = expires
            while len(self._signed_out) > self.max_passes:
                del self._signed_out[next(iter(self._signed_out))]
            streams = self._streams.pop(key, set())
        for stream in streams:
            stream.end()

    def signed_out(self, presented: str) -> bool:
        """Whether the sign-in of `presented` (a pass) was signed out here."""
        with self._lock:
            return pass_id(presented) in self._signed_out

    def watch(self, presented: str | None) -> StreamSignIn:
        """The sign-in of a stream let in with the pass `presented` (None: the bearer token, or no token
        configured), ended when that pass is signed out. `forget` it when the stream ends."""
        if presented is None:
            return StreamSignIn(None, None)
        watched = StreamSignIn(pass_id(presented), pass_expiry(presented))
        with self._lock:
            if watched.key in self._signed_out:
                watched.end()  # signed out since the request was let in
            else:
                self._streams.setdefault(pass_id(presented), set()).add(watched)
        return watched

    def forget(self, watched: StreamSignIn) -> None:
        if watched.key is None:
            return
        with self._lock:
            streams = self._streams.get(watched.key)
            if streams is not None:
                streams.discard(watched)
                if not streams:
                    del self._streams[watched.key]

    def __len__(self) -> int:
        with self._lock:
            return len(self._signed_out)


__all__ = ["MAX_SIGNED_OUT", "SCOPE_KEY", "SignOuts", "StreamSignIn"]
