"""A limit on wrong credentials per client address, shared by the HTTP guard (bearer tokens, panel passes)
and the panel's sign-in form (`/login`), so guessing the token costs the same on every path.

Past `max_failures` wrong credentials from one address in `window_seconds`, that address is locked out
until the window that held them has passed: every request of its that carries a credential is refused,
a correct one too (or a guesser would simply keep guessing and notice the one that is let in). Missing
credentials are not counted: they guess nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from awb.clock import Clock, SystemClock
from awb.shares import client_key

if TYPE_CHECKING:
    from awb.config import Config

#: Where the guard leaves the server's limiter in each request's ASGI scope, for the panel's `/login`.
SCOPE_KEY = "awb.sign_in_limit"


@dataclass
class _Failures:
    since: float
    count: int
    locked_until: float = 0.0


class SignInLimit:
    """Wrong-credential counts per client address (`awb.shares.client_key`: an IPv6 address by its
    /64), at most `max_addresses` of them (the oldest dropped)."""

    def __init__(
        self,
        max_failures: int = 20,
        window_seconds: float = 60.0,
        *,
        max_addresses: int = 10_000,
        clock: Clock | None = None,
    ) -> None:
        self.max_failures = max_failures
        self.window = window_seconds
        self.max_addresses = max_addresses
        self._clock = clock or SystemClock()
        self._entries: OrderedDict[str, _Failures] = OrderedDict()
        # The guard runs on the event loop, and a panel served by another server may run handlers in threads.
        self._lock = threading.Lock()

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def retry_after(self, address: str | None) -> int:
        """Whole seconds until `address` may present a credential again; 0 when it may now."""
        if address is None:
            return 0
        key = client_key(address)
        now = self._now()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return 0
            if entry.locked_until > now:
                return max(1, int(entry.locked_until - now + 0.999))
            if entry.since + self.window <= now:
                del self._entries[key]
            return 0

    def failed(self, address: str | None) -> None:
        """Count one wrong credential from `address`; the last one allowed locks it for a window."""
        if address is None:
            return
        key = client_key(address)
        now = self._now()
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None or entry.since + self.window <= now:
                entry = _Failures(since=now, count=0)
            entry.count += 1
            if entry.count >= self.max_failures:
                # Locked for a whole window from the last failure counted: at most `max_failures`
                # guesses per window, however the guesses are spread within it.
                entry.locked_until = now + self.window
                entry.since, entry.count = entry.locked_until, 0
            self._entries[key] = entry
            while len(self._entries) > self.max_addresses:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def limit_for(config: Config, clock: Clock | None = None) -> SignInLimit:
    """The limiter `config.http` asks for."""
    limits = config.http
    return SignInLimit(
        limits.max_auth_failures,
        limits.auth_failure_window_seconds,
        max_addresses=limits.auth_failure_addresses,
        clock=clock,
    )


def too_many_failures_message(seconds: int) -> str:
    return f"too many wrong credentials from this address; try again in {seconds} s"


__all__ = ["SCOPE_KEY", "SignInLimit", "limit_for", "too_many_failures_message"]
