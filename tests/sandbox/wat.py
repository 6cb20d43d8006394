"""WAT modules for the wasm runtime tests, written to the ABI in `awb.sandbox.wasm`."""

from __future__ import annotations

import json


def module(body: str, *, data: str = "", imports: str = "") -> str:
    """A module with a bump allocator at 1024; `data` is placed at offset 16."""
    escaped = data.replace("\\", "\\\\").replace('"', '\\"')
    return f"""
(module
  {imports}
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 1024))
  (data (i32.const 16) "{escaped}")
  (func $alloc (export "alloc") (param $len i32) (result i32)
    (local $ptr i32)
    (local.set $ptr (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $len)))
    (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
      (then (drop (memory.grow (i32.const 16)))))
    (local.get $ptr))
  {body}
)
"""


def constant(value: object) -> str:
    """A tool that ignores its params and returns `value`."""
    text = json.dumps(value)
    return module(
        f"""(func (export "run") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const {len(text.encode())})))""",
        data=text,
    )


ECHO = module(
    """(func (export "run") (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))"""
)

LOOP = module("""(func (export "run") (param i32 i32) (result i64) (loop $l (br $l)) (i64.const 0))""")

GROW_1GB = module(
    """(func (export "run") (param i32 i32) (result i64)
    (if (i32.eq (memory.grow (i32.const 16384)) (i32.const -1)) (then unreachable))
    (i64.const 0))"""
)


def grow_until_refused(pages: int) -> str:
    """A tool that grows its memory `pages` at a time until `memory.grow` returns -1, then traps."""
    return module(
        f"""(func (export "run") (param i32 i32) (result i64)
    (loop $more (br_if $more (i32.ne (memory.grow (i32.const {pages})) (i32.const -1))))
    unreachable)"""
    )


def grow_table(entries: int) -> str:
    """A tool that returns 0 when growing a table by `entries` is refused and traps when it is not."""
    return module(
        f"""(table $t 1 funcref)
  (func (export "run") (param i32 i32) (result i64)
    (if (i32.ne (table.grow $t (ref.null func) (i32.const {entries})) (i32.const -1)) (then unreachable))
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 1)))""",
        data="0",
    )


def read_file(path: str) -> str:
    """A tool that reads `path` through the host and returns the text as its JSON result."""
    return module(
        f"""(func (export "run") (param i32 i32) (result i64)
    (call $read (i32.const 16) (i32.const {len(path.encode())})))""",
        data=path,
        imports='(import "awb" "read_file" (func $read (param i32 i32) (result i64)))',
    )
