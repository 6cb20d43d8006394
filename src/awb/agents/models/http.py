"""The HTTP leg every provider adapter shares: POST JSON, retry what is transient, redact the key.

Every attempt sent is counted in the adapter's `Usage` (failed ones too). A `retry-after` (or
`retry-after-ms`) from the provider is honoured up to `max_retry_wait_seconds`; otherwise retries
back off exponentially. A wait that would pass the deadline of the run is not taken: the call fails at
once with the provider's message. Each attempt is bounded by the timeout as a whole, so a server that
trickles its body cannot hold a run, and the body is read up to `max_reply_bytes` (decoded, inflated no
further: `awb.agents.reply_body`), so one that sends without end, or a compressed body that inflates
without end, cannot fill memory. Provider failures surface as `ModelError` carrying the
provider's own message and HTTP status, never the key. Connections are kept alive while a run holds them
(`awb.agents.models.connections`).
"""

from __future__ import annotations

import email.utils
import functools
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import httpx

from awb.agents.errors import ModelError
from awb.agents.models.connections import Connections
from awb.agents.models.settings import ModelSettings
from awb.agents.reply_body import ACCEPTED_ENCODINGS, BodyRefused, read_capped
from awb.agents.result import Usage
from awb.credentials import MASK
from awb.text import surrogates_replaced

if TYPE_CHECKING:
    import ssl  # httpx imports it only when it makes a context: start-up need not

_RETRY_STATUSES = frozenset({408, 409, 429})
DEFAULT_TIMEOUT_SECONDS = 120.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_WAIT_SECONDS = 30.0
#: The largest reply body read from a provider. A model's reply is a few hundred kilobytes at most (its
#: output tokens are capped); a server that sends more, or a compressed body that inflates, is cut here
#: rather than held in memory whole.
DEFAULT_MAX_REPLY_BYTES = 32 * 1024 * 1024
#: Headers that describe the body as it came over the wire, not the decoded bytes a reply is rebuilt from.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context of every provider request in the process. httpx makes one per client, loading the
    CA bundle each time (20-25 ms of CPU), and a request outside a held pool gets a client of its own: a run
    paid that for each of its model requests and searches. Made once, as httpx would (SSL_CERT_FILE or SSL_CERT_DIR, else
    certifi's bundle)."""
    return httpx.create_ssl_context()


def needs_key(api_key: str | None, base_url: str, hosted: str, provider: str) -> str | None:
    """The message for a hosted API called without its key (None when there is a key, or when the base URL
    is a server of the user's own, which may need none)."""
    if api_key or base_url.rstrip("/") != hosted.rstrip("/"):
        return None
    prefix = provider.upper()
    # Said in every face (REST, blueprints, agents, the planner): the variable works in all of them, the
    # option only where the command has it.
    return (
        f"{prefix}_API_KEY is not set: the {provider} API needs it (a compatible server of your own may not: "
        f"give its URL in {prefix}_BASE_URL, or with --base-url to `awb agents run` or `awb plan`)"
    )


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, MASK) if secret else text


def token_count(value: object) -> int:
    """A usage count as the provider reported it; anything but a finite, non-negative number (a string, a
    list, a negative or infinite one, a boolean) counts as 0 rather than failing the run or the ledger."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0
    return int(value)


def _provider_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except (ValueError, RecursionError):  # not JSON, or JSON nested past the decoder's stack
        return response.text[:500] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    return _error_message(error) or response.text[:500]


def _error_message(error: object) -> str | None:
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:500]
    return error[:500] if isinstance(error, str) else None


def _error_in_reply(body: dict[str, Any]) -> tuple[str, int | None] | None:
    """The error a 2xx reply carries instead of an answer, and the status its `code` names: routers answer 200
    with the upstream's error in the body (a rate limit, a model that does not exist)."""
    error = body.get("error")
    if error is None or "choices" in body or "content" in body:
        return None
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code < 600 else None
    return _error_message(error) or "(no message)", status


def retry_after_seconds(headers: httpx.Headers) -> float | None:
    """The wait a provider asks for: `retry-after-ms`, or `retry-after` in seconds or as an HTTP date."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return max(0.0, float(milliseconds) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ProviderClient:
    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        secret: str | None,
        usage: Usage | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_retry_wait_seconds: float = DEFAULT_MAX_RETRY_WAIT_SECONDS,
        needs_key: str | None = None,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        #: What to say when the endpoint needs a key and none was given: the run fails at once with it,
        #: rather than after every retry with the provider's 401 (or a network error where it is unreachable).
        self._needs_key = needs_key
        self._headers = headers
        self._secret = secret
        self.usage = usage if usage is not None else Usage()
        self.defaults = ModelSettings(
            max_retries=max_retries, timeout_seconds=timeout_seconds, max_retry_wait_seconds=max_retry_wait_seconds
        )
        self._backoff_seconds = backoff_seconds
        self.max_reply_bytes = max_reply_bytes
        #: How the client waits between attempts; tests swap it to see the waits without taking them.
        self.sleep: Callable[[float], Awaitable[None]] = anyio.sleep
        #: Kept-alive connections while a run (or the caller) holds them open; else one client per call.
        self.connections = Connections(tls_context)

    def _wait(self, attempt: int, asked: float | None, cap: float) -> float:
        if asked is not None:
            return min(asked, cap)
        return min(self._backoff_seconds * 2.0 ** (attempt - 1), cap)

    async def _send(
        self, client: httpx.AsyncClient, url: str, payload: dict[str, Any], timeout: float
    ) -> httpx.Response:
        """POST and read the reply, decoded, up to `max_reply_bytes` (`BodyRefused` past them)."""
        headers = {"Accept-Encoding": ACCEPTED_ENCODINGS, **self._headers}
        # The timeout goes with the request: the client may be a pooled one, shared by calls whose settings differ.
        request = client.build_request("POST", url, json=payload, headers=headers, timeout=httpx.Timeout(timeout))
        try:
            response = await client.send(request, stream=True)
        except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
            if not self.connections.holding():
                raise
            # No answer came on a kept connection: the server closed it, idle, just as it was taken (httpcore
            # drops one it sees closed before; this is the moment between). httpx does not send again; sent
            # at once on another connection, not after a retry's wait. Counted as the failed attempt it was.
            self.usage.requests += 1
            self.usage.failed_requests += 1
            response = await client.send(request, stream=True)
        try:
            body = await read_capped(response, self.max_reply_bytes)
        finally:
            await response.aclose()
        kept = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _WIRE_HEADERS]
        return httpx.Response(response.status_code, headers=kept, content=body, request=response.request)

    async def post(self, path: str, payload: dict[str, Any], settings: ModelSettings | None = None) -> dict[str, Any]:
        """POST `payload`; the body as a dict, or `ModelError` with `status` and `attempts` in details."""
        if self._needs_key is not None:
            raise ModelError(self._needs_key, attempts=0, status=None)
        chosen = self.defaults.merged(settings)
        retries = chosen.max_retries if chosen.max_retries is not None else DEFAULT_MAX_RETRIES
        timeout = chosen.timeout_seconds or DEFAULT_TIMEOUT_SECONDS
        cap = chosen.max_retry_wait_seconds
        cap = DEFAULT_MAX_RETRY_WAIT_SECONDS if cap is None else cap
        url = f"{self.base_url}{path}"
        failure, status, asked = "", None, None
        attempt = 0
        async with self.connections.client() as client:
            for attempt in range(retries + 1):
                if attempt:
                    wait = self._wait(attempt, asked, cap)
                    # Waiting past the deadline of the run (or of whatever bounds this call) would only end it
                    # in a bare timeout: end now, with what the provider said.
                    if wait >= anyio.current_effective_deadline() - anyio.current_time():
                        failure += f"; not retried: the wait of {wait:g} s would pass the run's deadline"
                        raise ModelError(redact(failure, self._secret), attempts=attempt, status=status)
                    await self.sleep(wait)
                self.usage.requests += 1
                asked, status = None, None
                try:
                    with anyio.fail_after(timeout):
                        response = await self._send(client, url, payload, timeout)
                except BodyRefused as err:
                    # Not retried: the same request would likely be answered the same way.
                    failure = f"provider reply is {err}"
                    self.usage.failed_requests += 1
                    break
                except (TimeoutError, httpx.TimeoutException):
                    failure = f"the provider did not answer within {timeout:g} s"
                    self.usage.failed_requests += 1
                    continue
                except httpx.HTTPError as err:
                    failure = f"cannot reach the provider: {type(err).__name__}: {err}"
                    self.usage.failed_requests += 1
                    continue
                if response.status_code >= 400:
                    self.usage.failed_requests += 1
                    status = response.status_code
                    failure = f"provider returned HTTP {status}: {_provider_message(response)}"
                    if status >= 500 or status in _RETRY_STATUSES:
                        asked = retry_after_seconds(response.headers)
                        continue
                    break
                try:
                    body = response.json()
                except (ValueError, RecursionError):  # RecursionError: JSON nested past the decoder's stack
                    failure = "provider returned a body that is not JSON"
                    self.usage.failed_requests += 1
                    continue
                if not isinstance(body, dict):
                    self.usage.failed_requests += 1
                    failure = "provider returned JSON that is not an object"
                    continue
                carried = _error_in_reply(body)
                if carried is None:
                    # A `\\ud800` escape in the reply is a lone surrogate in its text, which no store or
                    # response can encode: the run finished, then failed to save or send its answer.
                    return dict(surrogates_replaced(body))
                self.usage.failed_requests += 1
                failure, status = f"provider returned an error: {carried[0]}", carried[1]
                if status is not None and (status >= 500 or status in _RETRY_STATUSES):
                    continue
                break
        raise ModelError(redact(failure, self._secret), attempts=attempt + 1, status=status)
