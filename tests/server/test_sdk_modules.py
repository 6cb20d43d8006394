"""`awb.server.sdk_modules`: a server imports the SDK's server side alone, and the rest of the SDK is
still there the moment anything asks for it.

Each check runs in a fresh interpreter: this test process imported the whole SDK long ago.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

PRELUDE = """
import sys
from awb.server import sdk_modules
"""


def _run(body: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(body)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_servers_modules_load_without_the_sdks_client_or_high_level_server() -> None:
    out = _run(
        """
        assert sdk_modules.serve_first()
        import awb.server.transports, awb.server.stdio
        import awb.api.app, awb.web  # the REST API and the panel, built once the server serves
        loaded = sorted(m for m in ("mcp.client", "mcp.server.mcpserver", "httpx2") if m in sys.modules)
        print(loaded)
        """
    )
    assert out.strip() == "[]"


def test_the_rest_of_the_sdk_comes_in_when_asked_for_by_name() -> None:
    out = _run(
        """
        assert sdk_modules.serve_first()
        import awb.server.transports
        from mcp import Client  # what the agents' MCP client does on a blueprint's first run
        from mcp.server import MCPServer, Server
        import mcp, mcp.client.client, mcp.server.lowlevel
        assert Client is mcp.client.client.Client and Server is mcp.server.lowlevel.Server
        assert mcp.server is sys.modules["mcp.server"] and "MCPServer" in mcp.server.__all__
        print(len(mcp.__all__) > 10)
        """
    )
    assert out.strip() == "True"


def test_the_completion_runs_once_and_a_missing_name_is_still_an_attribute_error() -> None:
    out = _run(
        """
        assert sdk_modules.serve_first()
        import mcp
        try:
            mcp.no_such_name
        except AttributeError as error:
            print("AttributeError", error)
        first = mcp.Client
        import mcp.server
        assert mcp.server.Server is not None and mcp.Client is first
        """
    )
    assert out.startswith("AttributeError module 'mcp' has no attribute 'no_such_name'")


def test_a_star_import_gets_every_name_the_package_exports() -> None:
    out = _run(
        """
        assert sdk_modules.serve_first()
        import awb.server.transports
        namespace = {}
        exec("from mcp.server import *", namespace)
        import mcp.server
        print(sorted(set(mcp.server.__all__) - set(namespace)))
        """
    )
    assert out.strip() == "[]"


def test_nothing_is_done_when_the_sdk_is_already_imported() -> None:
    out = _run(
        """
        import mcp
        print(sdk_modules.serve_first(), "__awb_complete__" in vars(mcp))
        """
    )
    assert out.strip() == "False False"


def test_the_wire_models_are_built_when_first_used_and_then_validate_as_before() -> None:
    out = _run(
        """
        assert sdk_modules.serve_first()
        import awb.server.transports
        import mcp_types._v2025_11_25 as v2025, mcp_types._v2026_07_28 as v2026
        from mcp_types.methods import validate_client_request
        from pydantic import ValidationError
        models = [m for module in (v2025, v2026) for m in vars(module).values() if getattr(m, "model_fields", None)]
        built = sum(m.__pydantic_complete__ for m in models)
        validate_client_request("tools/call", "2025-11-25", {"name": "t", "arguments": {"a": 1}})
        try:
            validate_client_request("tools/call", "2025-11-25", {"arguments": {"a": 1}})
        except ValidationError as error:
            print("refused", error.error_count())
        print(len(models) > 300, built, v2025.CallToolRequest.__pydantic_complete__)
        """
    )
    assert out.splitlines() == ["refused 1", "True 0 True"]
