"""A long-lived server's heap, kept out of the cycle collector's sight.

Every full collection walks every object the collector tracks. A server's heap is mostly made once
(the SDK, pydantic's schemas, the workbench) and lives as long as the process, so `settle()` freezes
it (`gc.freeze`): after start-up, and once more when the first calls have built what a server builds
on first use (the SDK's wire models, see awb.server.sdk_modules; compiled schemas; caches). Measured with benchmarks/http_load.py: a server that
froze only at start-up spent ~0.1-0.2 ms more CPU per call than one that froze again after its first
calls. Objects frozen are still freed when nothing refers to them; only a reference cycle among them
outlives its last use, which is why each freeze collects first.
"""

from __future__ import annotations

import gc

#: Tool calls after which a server freezes its heap once more.
WARM_UP_CALLS = 200


def settle() -> None:
    """Collect, then freeze everything alive: it is no longer walked by the collector."""
    gc.collect()
    gc.freeze()


class WarmUp:
    """Counts a server's first tool calls and settles the heap once after `calls` of them."""

    def __init__(self, calls: int = WARM_UP_CALLS) -> None:
        self._left = calls

    def counted(self) -> None:
        if self._left > 0:
            self._left -= 1
            if self._left == 0:
                settle()
