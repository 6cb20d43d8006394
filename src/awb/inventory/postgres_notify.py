"""Change propagation between servers on one PostgreSQL inventory: NOTIFY on write, LISTEN in a thread.

Every write that others must follow sends `pg_notify` in its own transaction, so the message goes out
exactly when (and only if) the change commits. Each store listens on one dedicated connection in a
daemon thread that blocks in the server's socket (no polling of tables) and hands each change from
another process to the subscribers. A lost connection is re-opened; whatever happened meanwhile is
announced as a `resync` so subscribers reload instead of trusting a stale cache.

The same connection listens for the event journal's appends (`EVENTS_CHANNEL`, awb.feed): those wake
every reader of the journal, this process's own appends included; and for the web panel's sign-outs
(`SIGN_OUTS_CHANNEL`, awb.sign_outs), which wake every server's copy of them.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from awb.inventory.panel_sign_outs import SIGN_OUTS_CHANNEL
from awb.text import first_line

log = logging.getLogger("awb.inventory.postgres")

CHANNEL = "awb_inventory"
#: Each append to `workbench_events` notifies this channel with the new event's id.
EVENTS_CHANNEL = "awb_events"
#: Channels whose every message (and every reconnect, which may have missed some) wakes their listeners.
WAKE_CHANNELS = (EVENTS_CHANNEL, SIGN_OUTS_CHANNEL)
#: How long the listener blocks before it looks at its stop flag (it wakes at once on a message).
WAIT_SECONDS = 0.5
#: NOTIFY payloads must stay under 8000 bytes; bulk changes are sent as `resync` instead.
MAX_IDS_PER_MESSAGE = 100


@dataclass(frozen=True)
class Change:
    """One committed change made by another process."""

    kind: str  # crafted, updated, version, vector, purged, resync
    tool_ids: tuple[str, ...] = ()
    #: Whether the equipped set may have changed (clients must re-list).
    equipped: bool = False
    data: dict[str, Any] = field(default_factory=dict)


ChangeListener = Callable[[Change], None]
#: Called when the event journal may have grown (an append anywhere, or a reconnect that may have missed some).
JournalListener = Callable[[], None]
#: Called when a wake channel had news (a message, or a reconnect that may have missed some).
WakeListener = Callable[[], None]


def payload(origin: str, kind: str, tool_ids: list[str], *, equipped: bool = False) -> str:
    if len(tool_ids) > MAX_IDS_PER_MESSAGE:
        kind, tool_ids = "resync", []
    return json.dumps({"o": origin, "k": kind, "ids": tool_ids, "eq": equipped}, separators=(",", ":"))


def send(conn: Any, origin: str, kind: str, tool_ids: list[str], *, equipped: bool = False) -> None:
    """Queue a change message in `conn`'s current transaction (delivered on commit)."""
    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload(origin, kind, tool_ids, equipped=equipped)))


class ChangeListenerThread:
    """LISTENs on a connection of its own and calls the listeners for changes made by other origins."""

    def __init__(self, conninfo: str, origin: str, connect: Callable[[str], Any]) -> None:
        self._conninfo = conninfo
        self._origin = origin
        self._connect = connect
        self._listeners: list[ChangeListener] = []
        self._wake_listeners: dict[str, list[WakeListener]] = {channel: [] for channel in WAKE_CHANNELS}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="awb-pg-listen", daemon=True)
        self.received = 0

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)
            self._start()
        self._ready.wait(timeout=10)
        return lambda: self._unsubscribe(self._listeners, listener)

    def subscribe_journal(self, listener: JournalListener) -> Callable[[], None]:
        """Call `listener` (on the feed's thread) whenever the event journal may have grown."""
        return self.subscribe_wake(EVENTS_CHANNEL, listener)

    def subscribe_wake(self, channel: str, listener: WakeListener) -> Callable[[], None]:
        """Call `listener` (on the feed's thread) on every message of `channel` (one of `WAKE_CHANNELS`),
        and after a reconnect."""
        listeners = self._wake_listeners[channel]
        with self._lock:
            listeners.append(listener)
            self._start()
        self._ready.wait(timeout=10)
        return lambda: self._unsubscribe(listeners, listener)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _start(self) -> None:
        """Start the thread once (called under the lock)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def _unsubscribe(self, listeners: list[Any], listener: Any) -> None:
        with self._lock:
            if listener in listeners:
                listeners.remove(listener)

    def stop(self) -> None:
        """Ask the thread to end after the message it is waiting for (see `close`)."""
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=WAIT_SECONDS * 4)

    def _run(self) -> None:
        reconnecting = False
        while not self._stop.is_set():
            try:
                with self._connect(self._conninfo) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    for channel in WAKE_CHANNELS:
                        conn.execute(f"LISTEN {channel}")
                    self._ready.set()
                    if reconnecting:
                        log.warning("the inventory change feed is back; caches reload")
                        reconnecting = False
                        self._dispatch(Change("resync", equipped=True))
                        for channel in WAKE_CHANNELS:
                            self._wake(channel)
                    while not self._stop.is_set():
                        # One message at a time, so `close` (which sends one) is seen at once.
                        for message in conn.notifies(timeout=WAIT_SECONDS, stop_after=1):
                            if message.channel in self._wake_listeners:
                                self._wake(message.channel)
                            else:
                                self._handle(message.payload)
            except Exception as exc:
                if self._stop.is_set():
                    return
                # Said once per outage, not once a second while the database is away.
                (log.debug if reconnecting else log.warning)(
                    "lost the inventory change feed (%s); reconnecting",
                    first_line(exc),
                )
                reconnecting = True
                self._ready.set()
                self._stop.wait(1.0)

    def _handle(self, raw: str) -> None:
        try:
            message = json.loads(raw)
            if message.get("o") == self._origin or message.get("k") == "stop":
                return
            change = Change(str(message["k"]), tuple(message.get("ids", ())), bool(message.get("eq")))
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed inventory change message: %.200s", raw)
            return
        self.received += 1
        self._dispatch(change)

    def _wake(self, channel: str) -> None:
        with self._lock:
            listeners = list(self._wake_listeners[channel])
        for listener in listeners:
            try:
                listener()
            except Exception:
                log.exception("a listener of %s failed", channel)

    def _dispatch(self, change: Change) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(change)
            except Exception:  # one failing cache must not stop the feed for the others
                log.exception("an inventory change listener failed on %s", change.kind)


__all__ = [
    "CHANNEL",
    "EVENTS_CHANNEL",
    "SIGN_OUTS_CHANNEL",
    "WAKE_CHANNELS",
    "Change",
    "ChangeListener",
    "ChangeListenerThread",
    "JournalListener",
    "WakeListener",
    "payload",
    "send",
]
