"""What the workbench's ASGI layer does when a client hangs up on a 2026-07-28 request answered with JSON
(the dropped call itself is in test_http_responses.py): which requests it listens on."""

from __future__ import annotations

from awb.server.hangup import single_exchange


def _scope(method: str, version: bytes | None) -> dict[str, object]:
    headers = [(b"content-type", b"application/json")]
    if version is not None:
        headers.append((b"mcp-protocol-version", version))
    return {"type": "http", "method": method, "headers": headers}


def test_only_posts_the_sdk_serves_in_their_own_task_are_listened_on() -> None:
    assert single_exchange(_scope("POST", b"2026-07-28"))
    assert single_exchange(_scope("POST", b"2099-01-01"))  # the SDK routes unknown versions there too
    assert not single_exchange(_scope("POST", b"2025-11-25"))  # a session's request, cancelled by notification
    assert not single_exchange(_scope("POST", None))  # an initialize
    assert not single_exchange(_scope("GET", b"2026-07-28"))
