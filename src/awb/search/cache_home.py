"""Where awb keeps what it can always make again: `$XDG_CACHE_HOME/awb`, else `~/.cache/awb`.

Its own module, beneath the caches kept there (the tool vector cache, the embedding model's optimised
copy), so that neither has to import the other to find the folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_home(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/awb`, else `~/.cache/awb` (`Path.home()` raises RuntimeError without a home)."""
    environ = os.environ if environ is None else environ
    xdg = environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative value is invalid and ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "awb"
