"""The web panel's sign-ins that ended before their pass expired (Sign out), shared by the server's HTTP
guard and the panel, and the end of every long response (the event stream) let in with one of them.

A pass (`awb.panel_access`) is checked by its HMAC alone, so Sign out could only ask the browser to forget
it: a copy (another tab's event stream, a cookie taken from a shared machine) stayed good for its 12
hours. The server remembers each pass signed out until the pass expires, and ends the streams opened
with it the moment it is signed out, or expires.

Kept in the inventory too (`awb.inventory.panel_sign_outs`), when the store keeps them: a sign-out holds
after a restart and on every server of a shared PostgreSQL inventory. Each server checks a pass against
its copy in memory (no database round trip per request), which `following` keeps in step with the
store: read whole before the server serves, then on PostgreSQL at once when any server signs a pass out
(LISTEN/NOTIFY; looked at every `NOTIFIED_SECONDS` too), on SQLite every `POLL_SECONDS` (another process
on the file cannot tell it). So a sign-out on another server holds here within milliseconds on
PostgreSQL, within `POLL_SECONDS` on SQLite, and ends the streams open here with that pass then too.
While the store does not answer, each server goes on with the sign-outs it knows.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Protocol, runtime_checkable

import anyio

from awb.inventory.lane import StoreLane
from awb.panel_access import pass_expiry, pass_id
from awb.wakeup import Wakeup, call_soon_on

log = logging.getLogger("awb.sign_outs")

#: Where the guard leaves the server's sign-outs in each request's ASGI scope, for the panel.
SCOPE_KEY = "awb.sign_outs"
#: Passes kept as signed out at once, here and in the store. Past it, those that expire first are folded
#: into a floor: every pass that expires no later is refused (more sign-ins end, never fewer). Only a
#: person who has the token can sign in, so only they could fill it, and they have no need to.
MAX_SIGNED_OUT = 10_000
#: How often a server on a SQLite inventory reads the sign-outs other processes on the file made.
POLL_SECONDS = 1.0
#: How often a server on PostgreSQL reads them though no NOTIFY came (one lost with a connection).
NOTIFIED_SECONDS = 30.0
#: The row of the store that holds the floor (`awb.inventory.panel_sign_outs.FLOOR`).
_FLOOR = "*"


def sign_out_key(presented: str) -> str:
    """What names the sign-in of a pass in memory and in the store: a digest of its id
    (`panel_access.pass_id`), so the store holds no part of any pass."""
    return hashlib.sha256(pass_id(presented).encode("utf-8", "replace")).hexdigest()


@runtime_checkable
class SignOutStore(Protocol):
    """A store that keeps sign-outs (both inventories do; `awb.inventory.panel_sign_outs`)."""

    def record_sign_out(self, key: str, expires: int, *, now: int, keep: int) -> None: ...

    def sign_outs_after(self, seq: int) -> tuple[int, list[tuple[str, int]]]: ...


class StreamSignIn:
    """The sign-in a long response was let in with: `ended()` once it is signed out or its pass has
    expired; a wait inside `bounded()` is cut short the moment it ends."""

    def __init__(self, key: str | None, expires: float | None) -> None:
        #: The pass's `sign_out_key`; None for the bearer token, or when no token is configured: nothing
        #: signs those out while the server runs (it reads its token once, at start).
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
        call_soon_on((loop, scope.cancel) for loop, scope in waits)

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
    """The passes signed out that have not expired yet (on this server, or in `store` by any server), and
    the streams open on each pass. Without a store (the panel served alone) they are this server's only."""

    def __init__(
        self, max_passes: int = MAX_SIGNED_OUT, *, store: SignOutStore | None = None, lane: StoreLane | None = None
    ) -> None:
        self.max_passes = max_passes
        self._store = store
        self._lane = lane if lane is not None or store is None else StoreLane(store)
        self._signed_out: dict[str, int] = {}  # sign-out key -> its pass's expiry
        #: Every pass that expires no later than this is signed out (sign-outs past `max_passes`, folded).
        self._floor = 0
        #: Where this server's reading of the store's sign-outs is.
        self._seq = 0
        #: Sign-outs the store has not taken yet (it did not answer): written with the next refresh.
        self._unsaved: dict[str, int] = {}
        self._streams: dict[str, set[StreamSignIn]] = {}
        self._store_failing = False
        # The guard runs on the event loop, and a panel served by another server may run handlers in threads.
        self._lock = threading.Lock()

    @classmethod
    def kept_in(cls, store: object, lane: StoreLane | None = None) -> SignOuts:
        """Sign-outs kept in `store` when it keeps them (both inventories do), else this server's only."""
        return cls(store=store, lane=lane) if isinstance(store, SignOutStore) else cls()

    async def sign_out(self, presented: str) -> None:
        """End the sign-in of `presented`, a pass `pass_ok` took: refused from now on, here at once, its
        streams ended, and by every server once the store has it (before this returns, when it answers)."""
        key, expires = sign_out_key(presented), pass_expiry(presented) or 0
        self._learn([(key, expires)])
        if self._store is None:
            return
        try:
            await self._save(key, expires)
        except Exception as error:  # this server refuses it meanwhile; the next refresh writes it
            with self._lock:
                self._unsaved[key] = expires
            self._learn([])  # holds what waits to `max_passes`
            log.warning("a sign-out is kept on this server until the inventory takes it: %s", error)

    def signed_out(self, presented: str) -> bool:
        """Whether the sign-in of `presented` (a pass) was signed out: this server's copy, no store query."""
        expires = pass_expiry(presented)
        key = sign_out_key(presented)
        with self._lock:
            return key in self._signed_out or (expires is not None and expires <= self._floor)

    def watch(self, presented: str | None) -> StreamSignIn:
        """The sign-in of a stream let in with the pass `presented` (None: the bearer token, or no token
        configured), ended when that pass is signed out. `forget` it when the stream ends."""
        if presented is None:
            return StreamSignIn(None, None)
        watched = StreamSignIn(sign_out_key(presented), pass_expiry(presented))
        with self._lock:
            if watched.key in self._signed_out or (watched.expires or 0) <= self._floor:
                watched.end()  # signed out since the request was let in
            else:
                self._streams.setdefault(watched.key or "", set()).add(watched)
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

    # --- in step with the store ---------------------------------------------------------------------

    async def refresh(self) -> None:
        """Write the sign-outs the store has not taken yet, then read those it holds that this server has
        not seen (through the store's lane: a database that does not answer holds no request up)."""
        if self._store is None or self._lane is None:
            return
        try:
            with self._lock:
                unsaved = list(self._unsaved.items())
            for key, expires in unsaved:
                await self._save(key, expires)
                with self._lock:
                    self._unsaved.pop(key, None)
            seq, rows = await self._lane.call(self._store.sign_outs_after, self._seq)
        except Exception as error:
            if not self._store_failing:  # said once per outage
                log.warning("could not read the sign-outs of other servers (kept: those known here): %s", error)
            self._store_failing = True
            return
        if self._store_failing:
            log.info("reading the sign-outs of other servers again")
        self._store_failing = False
        self._seq = max(self._seq, seq)
        self._learn(rows)

    @asynccontextmanager
    async def following(self) -> AsyncIterator[None]:
        """Inside: this server's copy follows the store (read whole first, so serve inside it)."""
        if self._store is None:
            yield
            return
        await self.refresh()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._follow)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()

    async def _follow(self) -> None:
        news = Wakeup()  # rung on the store's listening thread
        subscribe: Callable[[Callable[[], None]], Callable[[], None]] | None
        subscribe = getattr(self._store, "subscribe_sign_outs", None)
        unsubscribe = None
        if subscribe is not None:
            try:
                unsubscribe = await anyio.to_thread.run_sync(subscribe, news.ring, abandon_on_cancel=True)
            except Exception as error:  # the server serves on; it looks for sign-outs as often as on SQLite
                log.warning("not woken by other servers' sign-outs (read every %g s instead): %s", POLL_SECONDS, error)
        every = NOTIFIED_SECONDS if unsubscribe is not None else POLL_SECONDS
        try:
            seen = news.count  # `following` has just read the store whole

            def rung() -> bool:
                return news.count != seen

            while True:
                await news.wait(rung, every)
                seen = news.count  # news rung while the refresh reads wakes the next wait at once
                await self.refresh()
        finally:
            if unsubscribe is not None:
                unsubscribe()

    async def _save(self, key: str, expires: int) -> None:
        assert self._store is not None and self._lane is not None
        await self._lane.call(self._store.record_sign_out, key, expires, now=int(time.time()), keep=self.max_passes)

    def _learn(self, rows: list[tuple[str, int]]) -> None:
        """Take in sign-outs (`(key, expiry)`; the floor as `_FLOOR`) and end the streams they end."""
        now = time.time()
        ended: list[StreamSignIn] = []
        with self._lock:
            floor = self._floor
            for key, expires in rows:
                if key == _FLOOR:
                    floor = max(floor, expires)
                elif expires > now:
                    self._signed_out[key] = expires
                    ended += self._streams.pop(key, ())
            if len(self._signed_out) > self.max_passes:
                ordered = sorted(self._signed_out.values())
                floor = max(floor, ordered[len(ordered) - self.max_passes - 1])
            if floor > self._floor:
                self._floor = floor
                for key, streams in list(self._streams.items()):
                    if any((stream.expires or 0) <= floor for stream in streams):
                        ended += streams
                        del self._streams[key]
            for gone in [key for key, until in self._signed_out.items() if until <= now or until <= self._floor]:
                del self._signed_out[gone]
            for gone in [key for key, until in self._unsaved.items() if until <= now]:
                del self._unsaved[gone]
            # While the store does not answer, a flood of sign-outs waits here, at most `max_passes` of them:
            # past it, those that expire first are refused here only (under this server's floor).
            for gone in sorted(self._unsaved, key=self._unsaved.__getitem__)[: len(self._unsaved) - self.max_passes]:
                del self._unsaved[gone]
        for stream in ended:
            stream.end()


__all__ = ["MAX_SIGNED_OUT", "SCOPE_KEY", "SignOutStore", "SignOuts", "StreamSignIn", "sign_out_key"]
