"""The processes `awb doctor`'s sandbox probes run in, started before it loads its config: their
interpreters start and import (the longest part of the slowest probes) while doctor imports pydantic,
loads the config and builds the runtimes, which then configure them (the zygote's config message; the
JavaScript worker's and the wasm compile process's ids, claimed meanwhile, as their first frame).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from awb.errors import AwbError

if TYPE_CHECKING:
    import asyncio

    from awb.sandbox.cpython.handles import LaunchedZygote


@dataclass
class ProbeProcesses:
    """A cpython zygote, a JavaScript worker and a wasm compile process; None where that runtime is missing
    (its probe says why) or nothing was started (`--quick`)."""

    zygote: LaunchedZygote | None = None
    javascript: asyncio.subprocess.Process | None = None
    wasm: asyncio.subprocess.Process | None = None

    async def discard(self) -> None:
        """End them all, when doctor stops before building the runtimes that would."""
        if self.zygote is not None:
            self.zygote.discard()
        for process in (self.javascript, self.wasm):
            if process is not None:
                process.kill()
                await process.wait()


async def launch_probe_processes() -> ProbeProcesses:
    from awb.sandbox.wasm import wasmtime_missing
    from awb.sandbox.wasm_compile import launch_compiler

    # The wasm compile process first (its interpreter and wasmtime take the longest to get ready), before
    # even the JavaScript runtime's module is imported.
    wasm = await _launched_ahead(wasmtime_missing(), launch_compiler)
    from awb.sandbox.javascript import launch_worker, quickjs_missing

    javascript = await _launched_ahead(quickjs_missing(), launch_worker)
    return ProbeProcesses(_launched_zygote(), javascript, wasm)


async def _launched_ahead(
    missing: str | None, launch: Callable[[str], Awaitable[asyncio.subprocess.Process]]
) -> asyncio.subprocess.Process | None:
    """A JavaScript worker or wasm compile process for the probe, started ahead of its ids (`launch`); None
    when its runtime's package is `missing`."""
    import sys

    if missing is not None:
        return None
    try:
        return await launch(sys.executable)
    except OSError:  # the probe starts one itself, and says why it cannot
        return None


def _launched_zygote() -> LaunchedZygote | None:
    """A cpython zygote for the probe, started ahead; None where there is no cpython runtime to probe."""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    from awb.sandbox.cpython.handles import launch_zygote

    try:
        return launch_zygote(sys.executable)
    except AwbError:  # the probe starts one itself, and says why it cannot
        return None
