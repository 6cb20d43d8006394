"""The `tavily_search` arm: a small async client of Tavily's search API and the tool built on it.

The spine's `allowed_domains` go out as `include_domains` and are enforced again on what comes back:
a result from another domain is dropped and logged as a violation, whatever the service did. A reply is read
up to `MAX_REPLY_BYTES` and within the handler's timeout as a whole, so a broken or hostile endpoint
(`blueprints.tavily_base_url` may name any) can neither fill memory nor hold the run.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from awb.agents.models.connections import Connections
from awb.agents.models.http import tls_context
from awb.agents.reply_body import ACCEPTED_ENCODINGS, BodyRefused, read_capped
from awb.agents.toolbox import Handler, ToolOutcome, ToolSpec
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import TavilySearchArm
from awb.text import surrogates_replaced

DEFAULT_BASE_URL = "https://api.tavily.com"
TOOL_NAME = "tavily.search"
#: The largest reply read from Tavily. A search's reply is tens of kilobytes (at most 20 results of a few
#: kilobytes each); a longer one, or a compressed one that inflates past it, is cut here, not held whole.
MAX_REPLY_BYTES = 4 * 1024 * 1024
_DESCRIPTION = (
    "Search the web for current information. Returns a list of results with title, url and content. "
    "Use it when the answer needs facts you do not know or that may have changed."
)


def domain_allowed(url: str, domains: list[str]) -> bool:
    """True when `url`'s host is one of `domains` or a subdomain of one (any host when none are given)."""
    if not domains:
        return True
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)


def tavily_spec(arm: TavilySearchArm) -> ToolSpec:
    schema = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "description": "What to search for."},
            "max_results": {"type": "integer", "minimum": 1, "maximum": arm.max_results},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    return ToolSpec(TOOL_NAME, _DESCRIPTION, schema, "tavily")


async def _post(
    connections: Connections, url: str, body: dict[str, Any], headers: dict[str, str], timeout: float
) -> tuple[int, bytes]:
    """POST `body`; the status and the reply, read (decoded) up to `MAX_REPLY_BYTES` (`BodyRefused`), all within
    `timeout` seconds (`TimeoutError`): httpx's timeout is per read, which a server that trickles its reply never
    passes."""
    with anyio.fail_after(timeout):
        async with (
            connections.client() as client,
            client.stream(
                "POST",
                url,
                json=body,
                headers={"Accept-Encoding": ACCEPTED_ENCODINGS, **headers},
                timeout=httpx.Timeout(timeout),
            ) as response,
        ):
            return response.status_code, await read_capped(response, MAX_REPLY_BYTES)


def tavily_handler(
    arm: TavilySearchArm,
    *,
    api_key: str | None,
    base_url: str,
    allowed_domains: list[str],
    journal: RunJournal,
    timeout_seconds: float = 30.0,
    connections: Connections | None = None,
) -> Handler:
    """The search tool. Searches share `connections` while their owner holds them (a blueprint run's toolbox);
    without, each search connects anew."""
    connections = connections or Connections(tls_context)

    async def search(arguments: dict[str, Any]) -> ToolOutcome:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            return ToolOutcome(ok=False, payload="tavily.search needs a non-empty string `query`")
        if not api_key:
            return ToolOutcome(ok=False, payload="TAVILY_API_KEY is not set on the server")
        wanted = arguments.get("max_results", arm.max_results)
        max_results = wanted if isinstance(wanted, int) and 1 <= wanted <= arm.max_results else arm.max_results
        body: dict[str, Any] = {"query": query, "max_results": max_results, "search_depth": arm.search_depth}
        if allowed_domains:
            body["include_domains"] = allowed_domains
        url = f"{base_url.rstrip('/')}/search"
        try:
            status, reply = await _post(connections, url, body, {"Authorization": f"Bearer {api_key}"}, timeout_seconds)
        except TimeoutError:
            return ToolOutcome(ok=False, payload=f"Tavily did not answer within {timeout_seconds:g} s")
        except BodyRefused as err:
            return ToolOutcome(ok=False, payload=f"Tavily's reply is {err}")
        except httpx.HTTPError as err:
            return ToolOutcome(ok=False, payload=f"cannot reach Tavily: {type(err).__name__}")
        if status >= 400:
            text = reply[:1200].decode("utf-8", "replace")[:300]
            return ToolOutcome(ok=False, payload=f"Tavily returned HTTP {status}: {text}")
        try:
            data = surrogates_replaced(json.loads(reply))
        except (ValueError, RecursionError):  # RecursionError: nested past the decoder's stack
            return ToolOutcome(ok=False, payload="Tavily returned a body that is not JSON (or nested too deeply)")
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, list):
            return ToolOutcome(ok=False, payload="Tavily returned no result list")
        kept = []
        for item in results:
            if not isinstance(item, dict):
                continue
            url = str(item.get("url", ""))
            if not domain_allowed(url, allowed_domains):
                journal.violate(
                    "allowed_domains",
                    "a search result outside the allowed domains was dropped",
                    fatal=False,
                    url=url,
                    allowed_domains=allowed_domains,
                    tool=TOOL_NAME,
                )
                continue
            kept.append({"title": item.get("title", ""), "url": url, "content": item.get("content", "")})
        return ToolOutcome(ok=True, payload={"query": query, "results": kept[:max_results]})

    return search
