"""Full CPython for tools Monty cannot run: a zygote forking kernel-locked-down, single-use workers."""

from awb.sandbox.cpython.runtime import CPythonRuntime

__all__ = ["CPythonRuntime"]
