"""WAT modules for the wasm runtime tests, written to the ABI in `awb.sandbox.wasm`."""

from __future__ import annotations

import base64
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


def _leb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _section(number: int, items: list[bytes]) -> bytes:
    content = _leb(len(items)) + b"".join(items)
    return bytes([number]) + _leb(len(content)) + content


def _body(code: bytes, locals_: bytes = b"\x00") -> bytes:
    return _leb(len(locals_) + len(code)) + locals_ + code


def locals_bomb(functions: int, seed: int = 0) -> str:
    """Base64 of a module of a few kilobytes whose `functions` functions each declare 50,000 locals: a
    handful of bytes each in the binary, ~10 ms and ~5 MB each to compile."""
    types = [
        b"\x60\x00\x01\x7e",
        b"\x60\x01\x7f\x01\x7f",
        b"\x60\x02\x7f\x7f\x01\x7e",
    ]  # ()->i64 (i32)->i32 (i32,i32)->i64
    exports = [b"\x06memory\x02\x00", b"\x05alloc\x00\x00", b"\x03run\x00\x01"]
    bodies = [
        _body(b"\x41\x00\x0b"),  # alloc: i32.const 0
        _body(b"\x42" + _leb(seed % 64) + b"\x0b"),  # run: i64.const seed (a distinct module per seed)
        *[_body(b"\x20" + _leb(49_999) + b"\x0b", b"\x01" + _leb(50_000) + b"\x7e")] * functions,
    ]
    binary = b"".join(
        (
            b"\x00asm\x01\x00\x00\x00",
            _section(1, types),
            _section(3, [b"\x01", b"\x02", *[b"\x00"] * functions]),
            _section(5, [b"\x00\x01"]),
            _section(7, exports),
            _section(10, bodies),
        )
    )
    return base64.b64encode(binary).decode()
