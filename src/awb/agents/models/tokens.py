"""Token counts of a provider reply: as the provider reported them, or estimated from characters when it
reported none, so token and cost budgets hold on servers and proxies that leave `usage` out."""

from __future__ import annotations

import math

from awb.agents.models.http import token_count
from awb.agents.result import Usage

#: Characters per token of an estimate: about what English text and JSON come to with common
#: tokenizers (code and JSON run a little shorter), so an estimate errs on neither side by much.
CHARS_PER_TOKEN = 4


def text_chars(value: object) -> int:
    """Characters of the text in a JSON-like value: strings, keys and scalars, walked without recursion
    (a reply nested as deep as the decoder allows is counted, not a `RecursionError`)."""
    chars, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            chars += sum(len(str(key)) for key in item)
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif item is not None:
            chars += len(str(item))
    return chars


def estimated_tokens(value: object) -> int:
    return math.ceil(text_chars(value) / CHARS_PER_TOKEN)


def count_reply(usage: Usage, reported: tuple[object, object], *, sent: object, received: object) -> None:
    """Add one reply's (input, output) tokens to `usage`. A count the provider left out, sent as zero or
    as no count at all is estimated from what was `sent` (input) or `received` (output), and the reply is
    counted in `estimated_replies`: a run on such a server cannot spend without bound."""
    input_tokens, output_tokens = (token_count(count) for count in reported)
    estimated = False
    if input_tokens == 0:
        input_tokens, estimated = estimated_tokens(sent), True
    if output_tokens == 0:
        output_tokens, estimated = estimated_tokens(received), True
    usage.input_tokens += input_tokens
    usage.output_tokens += output_tokens
    usage.estimated_replies += estimated
