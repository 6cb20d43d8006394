"""A long-lived server's heap, kept out of the cycle collector's sight.

Every full collection walks every object the collector tracks. A server's heap is mostly made once
(the SDK, pydantic's schemas, the workbench) and lives as long as the process, so `settle()` freezes
it (`gc.freeze`): after start-up, and once more when the first calls have built what a server builds
on first use (the SDK's wire models, see awb.server.sdk_modules; compiled schemas; caches). Measured with benchmarks/http_load.py: a server that
froze only at start-up spent ~0.1-0.2 ms more CPU per call than one that froze again after its first
calls. Objects frozen are still freed when nothing refers to them; only a reference cycle among them
outlives its last use, which is why each freeze collects first.
Settling also spaces the young collections out (`YOUNG_COLLECTION_EVERY`): a request leaves a few reference
cycles behind (the SDK's and anyio's exceptions and cancel scopes among them), and a collection every 700
allocations, ~0.3 ms each, cost ~12 us a call; every 10,000 they cost ~5.
"""

from __future__ import annotations

import gc

#: Tool calls after which a server freezes its heap once more.
WARM_UP_CALLS = 200
#: Allocations (less deallocations) of the objects the collector tracks between two young collections, in
#: a settled server (Python's default: 700). The garbage cycles they find wait that much longer: a few MB.
YOUNG_COLLECTION_EVERY = 10_000


def settle() -> None:
    """Collect, then freeze everything alive: it is no longer walked by the collector. Young collections
    come every `YOUNG_COLLECTION_EVERY` allocations from then on."""
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_COLLECTION_EVERY), older, oldest)


class WarmUp:
    """Counts a server's first tool calls and settles the heap once after `calls` of them."""

    def __init__(self, calls: int = WARM_UP_CALLS) -> None:
        self._left = calls

    def counted(self) -> None:
        if self._left > 0:
            self._left -= 1
            if self._left == 0:
                settle()
