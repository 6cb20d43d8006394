"""numpy imported by one thread at a time.

Python's import locks do not make a first import of numpy safe from two threads: where two imports wait
on each other (a thread importing ONNX Runtime, whose extension imports numpy, while others import numpy
for the vector index or BM25), the import system lets both go on, and numpy's core extension refuses to
load a second time ("cannot load module more than once per process"). A server just started met it: the
embedding model loading in the background while the first searches came in answered them 500. Every
module of awb that imports numpy lazily calls `ensure_numpy()` first, and so does the model's loader
before ONNX Runtime: the first import runs once, under a lock, and the others find it done.
"""

from __future__ import annotations

import os
import sys
import threading

_lock = threading.Lock()
_imported = False
#: `OPENBLAS_NUM_THREADS` as it was when `ensure_numpy` loaded numpy (what OpenBLAS read as it started);
#: None when numpy was loaded before, by something else.
openblas_threads_at_import: str | None = None


def ensure_numpy() -> None:
    """Import numpy if no thread has yet (waiting for the one importing it); afterwards costs a flag test."""
    global _imported, openblas_threads_at_import
    if _imported:
        return
    with _lock:
        if not _imported:
            if "numpy" not in sys.modules:
                openblas_threads_at_import = os.environ.get("OPENBLAS_NUM_THREADS")
            import numpy  # noqa: F401  (imported for its side effect: the module is complete in sys.modules)

            _imported = True


__all__ = ["ensure_numpy"]
