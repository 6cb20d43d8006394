"""The wasmtime engine settings every wasm module is compiled and run with. The server and its compile
processes (`wasm_compiler`, which loads this file by path) must agree on them: a compiled module only
loads into an engine configured as the one that compiled it.

Standard library and `wasmtime` only.
"""

from __future__ import annotations

from typing import Any

MAX_WASM_STACK = 512 * 1024


def engine_config(*, parallel: bool = True) -> Any:
    import wasmtime

    config = wasmtime.Config()
    config.epoch_interruption = True
    config.max_wasm_stack = MAX_WASM_STACK
    # The GC proposal's heap (structs, arrays) lives beside linear memory, outside the store's memory
    # limit: modules that use it do not compile.
    config.wasm_gc = False
    # A compile process uses one core: a module made to be slow to compile cannot take every core.
    config.parallel_compilation = parallel
    return config
