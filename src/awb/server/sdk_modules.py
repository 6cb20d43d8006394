"""The MCP SDK's server side, imported without the rest of the SDK, so that a server serves sooner.

Importing any module under `mcp` runs `mcp/__init__.py` first, and that imports the SDK's client and,
through it, the high-level `MCPServer` (with httpx, its resource and prompt managers): about 0.3 s of
the 0.75 s the SDK costs a fresh process here, none of it used by the workbench's MCP face.

`serve_first()` puts the two packages on that path (`mcp`, `mcp.server`) in `sys.modules` without
running their `__init__`, so importing `mcp.server.lowlevel` loads what that module imports and no
more. Nothing is lost: each of the two modules completes itself (runs its own `__init__` in place,
as a plain import would have) the first time anything asks it for a name it does not have yet, as
`from mcp import Client` does when a blueprint run first connects to MCP servers. A server that never
runs one never loads the SDK's client.

It also defers the building of the SDK's per-protocol-version wire models (`mcp_types._v*`: some 360
pydantic models, each built when its module is imported). The server validates a request against one
of them at a time, and a session speaks one protocol version, so a server uses a few dozen; with
pydantic's documented `defer_build` each is built the first time it validates something. That saves
~0.1 s of the server's start-up here, and the models a server never uses are never built at all.

This depends on the SDK's layout only for speed: when `mcp` is already imported, or its layout is not
what it was, `serve_first()` does nothing and the SDK is imported the ordinary way.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

#: Outermost first: each is imported before any of its submodules.
PACKAGES = ("mcp", "mcp.server")
_ATTRIBUTE = "__awb_complete__"
#: The modules of the SDK's generated wire models (one per protocol version).
_WIRE_MODULES = "mcp_types._v"
_lock = threading.RLock()


def serve_first(*, wire_models: bool = True) -> bool:
    """Register the SDK's packages without running their `__init__`; False (nothing done) if `mcp` is
    already imported or cannot be found. `wire_models` defers the wire models' building now, which
    imports `mcp_types` (~0.1 s); without it the caller calls `defer_wire_models` itself before the SDK
    is imported (the HTTP server does, in the thread that imports the SDK once the server listens)."""
    if any(name in sys.modules for name in PACKAGES):
        return False
    if wire_models:
        defer_wire_models()
    for name in PACKAGES:
        parent = sys.modules.get(name.rpartition(".")[0]) if "." in name else None
        path = getattr(parent, "__path__", None)
        spec = importlib.util.find_spec(name) if parent is None else _child_spec(name, path)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            _forget()
            return False
        module = importlib.util.module_from_spec(spec)
        module.__getattr__ = _completing(module)  # type: ignore[method-assign]
        setattr(module, _ATTRIBUTE, False)
        sys.modules[name] = module
        if parent is not None:
            setattr(parent, name.rpartition(".")[2], module)
    return True


def defer_wire_models() -> bool:
    """Have the SDK's wire models built on first use; False (nothing done) if one of their modules is
    imported already (they are built) or the SDK no longer has their shared base."""
    if any(name.startswith(_WIRE_MODULES) for name in sys.modules):
        return False
    try:
        from mcp_types._wire_base import WireModel
    except ImportError:
        return False
    # A subclass takes its bases' config when it is created: set on the base before any is.
    WireModel.model_config["defer_build"] = True
    return True


def _child_spec(name: str, path: Any) -> Any:
    # find_spec("mcp.server") would import "mcp" the ordinary way; look in the registered parent's path.
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, path) if find is not None else None
        if spec is not None:
            return spec
    return None


def _forget() -> None:
    for name in PACKAGES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, _ATTRIBUTE, True) is False:
            del sys.modules[name]


def _completing(module: ModuleType) -> Any:
    def __getattr__(attribute: str) -> Any:
        # Any name but the mark, dunders too: `from mcp import *` reads `__all__`.
        if attribute != _ATTRIBUTE:
            _complete(module)
            # Completed now, or by another thread while this one waited for the lock.
            if attribute in module.__dict__:
                return module.__dict__[attribute]
        raise AttributeError(f"module {module.__name__!r} has no attribute {attribute!r}")

    return __getattr__


def _complete(module: ModuleType) -> None:
    """Run the package's own `__init__` in its module, once."""
    with _lock:
        if getattr(module, _ATTRIBUTE, True) is not False:
            return  # complete already
        setattr(module, _ATTRIBUTE, None)
        # First: a name its `__init__` asks of it before binding it fails as in any import.
        del module.__getattr__
        spec = module.__spec__
        assert spec is not None and spec.loader is not None
        try:
            spec.loader.exec_module(module)
        finally:
            setattr(module, _ATTRIBUTE, True)
