"""The HTTP leg every provider adapter shares: POST JSON, retry what is transient, redact the key.

Provider failures surface as `ModelError` carrying the provider's own message, never the key.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx

from awb.agents.errors import ModelError

_RETRY_STATUSES = frozenset({408, 409, 429})


def redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "***") if secret else text


def _provider_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.text[:500]


class ProviderClient:
    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        secret: str | None,
        max_retries: int = 2,
        backoff_seconds: float = 0.5,
        timeout_seconds: float = 120.0,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._headers = headers
        self._secret = secret
        self._max_retries = max_retries
        self._backoff_seconds = backoff_seconds
        self._timeout = httpx.Timeout(timeout_seconds)

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self._base_url}{path}"
        failure = ""
        async with httpx.AsyncClient(timeout=self._timeout) as client:
            for attempt in range(self._max_retries + 1):
                if attempt:
                    await anyio.sleep(self._backoff_seconds * 2 ** (attempt - 1))
                try:
                    response = await client.post(url, json=payload, headers=self._headers)
                except httpx.HTTPError as err:
                    failure = f"cannot reach the provider: {type(err).__name__}: {err}"
                    continue
                if response.status_code >= 400:
                    failure = f"provider returned HTTP {response.status_code}: {_provider_message(response)}"
                    if response.status_code >= 500 or response.status_code in _RETRY_STATUSES:
                        continue
                    break
                try:
                    body = response.json()
                except ValueError:
                    failure = "provider returned a body that is not JSON"
                    continue
                if isinstance(body, dict):
                    return body
                failure = "provider returned JSON that is not an object"
        raise ModelError(redact(failure, self._secret), attempts=attempt + 1)
