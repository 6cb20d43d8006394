"""A run's log: what it keeps of the values an agent or a tool sent (masked, bounded)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import anyio
import pytest

from awb.agents.toolbox import ToolOutcome, ToolSpec
from awb.blueprints.journal import (
    FLOOR_CHARS,
    SUMMARY_CHARS,
    LogLimits,
    RunJournal,
    log_limits,
    redact,
    summarize,
)
from awb.config import Config
from awb.safe_copy import CYCLE


def nested(levels: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def test_redacting_a_value_nested_thousands_deep_cuts_it_with_a_marker() -> None:
    text = json.dumps(redact(nested(5000, "tvly-abc"), ("tvly-abc",)))
    assert "nested deeper than" in text and "tvly-abc" not in text


def test_redacting_or_summarising_a_value_that_holds_itself_is_safe() -> None:
    value: dict[str, Any] = {"query": "tvly-abc", "api_key": "k"}
    value["self"] = value
    assert redact(value, ("tvly-abc",)) == {"query": "***", "api_key": "***", "self": CYCLE}
    summary = summarize(value, ("tvly-abc",))
    assert "tvly-abc" not in summary and CYCLE in summary


@pytest.mark.timeout(30)
def test_a_value_sharing_its_parts_is_redacted_and_summarised_in_bounded_work() -> None:
    shared: list[Any] = ["leaf"]
    for _ in range(40):
        shared = [shared, shared]
    assert len(summarize(shared)) <= SUMMARY_CHARS
    assert "more items]" in json.dumps(redact(shared))


def test_a_summary_of_a_deep_or_huge_output_is_short_and_masked() -> None:
    assert len(summarize(nested(5000))) <= SUMMARY_CHARS
    huge = {"api_key": "k", "text": "tvly-abc " + "y" * 5_000_000}
    summary = summarize(huge, ("tvly-abc",))
    assert len(summary) <= SUMMARY_CHARS and "tvly-abc" not in summary and '"api_key": "***"' in summary


async def logged_call(journal: RunJournal, arguments: Any, tool: str = "web.search") -> dict[str, Any]:
    await journal.record(tool, arguments, 0.0, success=True, output="ok")
    return journal.entries[-1].data


def stored(entry: dict[str, Any]) -> int:
    return len(json.dumps(entry))


@pytest.mark.anyio
async def test_a_huge_argument_is_logged_cut_with_its_size_and_sha256() -> None:
    journal = RunJournal("r", 10, ("tvly-abc",), LogLimits(value_chars=1000, run_chars=100_000))
    query = "tvly-abc " + "q" * 5_000_000
    data = await logged_call(journal, {"query": query})
    masked = "*** " + "q" * 5_000_000
    digest = hashlib.sha256(masked.encode()).hexdigest()
    prefix, marker = data["arguments"]["query"].split("…[cut: ")
    assert masked.startswith(prefix) and 900 < len(prefix) < 1000  # the object's braces and key count too
    assert marker == f"{len(masked)} characters in all, sha256 {digest}]"
    assert stored(data) < 1500 and "tvly-abc" not in json.dumps(data)


@pytest.mark.anyio
async def test_many_small_values_or_long_keys_are_cut_to_the_same_limit() -> None:
    journal = RunJournal("r", 10, limits=LogLimits(value_chars=1000, run_chars=100_000))
    rows = await logged_call(journal, {"rows": list(range(1_000_000))})
    keys = await logged_call(journal, {f"{'k' * 100_000}{i}": i for i in range(1000)})
    assert stored(rows) < 1500 and rows["arguments"]["rows"][-1].endswith("more items]")
    assert stored(keys) < 1500 and "…" in keys["arguments"]


@pytest.mark.anyio
async def test_a_value_of_no_json_type_is_logged_as_its_cut_text() -> None:
    class Loud:
        def __str__(self) -> str:
            return "L" * 1_000_000

    journal = RunJournal("r", 10, limits=LogLimits(value_chars=1000, run_chars=100_000))
    assert stored(await logged_call(journal, {"thing": Loud()})) < 1500


@pytest.mark.anyio
async def test_a_run_keeps_its_budget_and_each_later_value_a_floor_yet_names_every_call_in_full() -> None:
    limits = LogLimits(value_chars=2000, run_chars=10_000)
    journal = RunJournal("r", 100, limits=limits)
    for i in range(50):
        await logged_call(journal, {"text": "x" * 50_000}, tool=f"tool_{i}")
    journal.violate("allowed_domains", "dropped", fatal=False, url="https://evil.test/" + "p" * 100_000)
    total = sum(stored(entry.data) for entry in journal.entries)
    assert total < limits.run_chars + 51 * (FLOOR_CHARS + 250)
    first, last = journal.entries[0].data, journal.entries[49].data
    assert len(first["arguments"]["text"]) > 1900 and len(last["arguments"]["text"]) < FLOOR_CHARS + 120
    assert [entry.data["tool"] for entry in journal.entries[:50]] == [f"tool_{i}" for i in range(50)]
    assert all(entry.data["success"] is True for entry in journal.entries[:50])
    assert [call.tool for call in journal.calls] == [f"tool_{i}" for i in range(50)]
    assert journal.entries[-1].data["url"].startswith("https://evil.test/p")


def test_the_limits_come_from_the_configuration() -> None:
    config = Config(blueprints={"log_value_chars": 500, "log_run_chars": 5000})
    assert log_limits(config) == LogLimits(value_chars=500, run_chars=5000)
    assert log_limits(Config()) == LogLimits()


TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ"
KEY = "sk-proj-" + "K" * 32
PEM = "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 3000 + "\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("at", [0, SUMMARY_CHARS - 20, SUMMARY_CHARS + 10])
def test_a_summary_masks_the_credentials_it_shows_even_one_straddling_its_cut(at: int) -> None:
    for secret in (f"Bearer {TOKEN}", KEY, PEM):
        text = "x " * (at // 2) + secret + " y" * 10_000_000
        summary = summarize({"text": text}) + summarize(text)
        assert secret[:12] not in summary and TOKEN[:12] not in summary and "AAAA" not in summary
        assert summary.endswith("…")


@pytest.mark.anyio
async def test_a_logged_call_masks_credentials_in_its_arguments_and_output_and_keeps_the_environments_masking() -> None:
    journal = RunJournal("r", 10, ("tvly-abc",))
    await journal.record(
        "web.fetch",
        {"headers": {"Authorization": "x"}, "url": f"https://e.x/?key={KEY}", "note": "tvly-abc " + PEM},
        0.0,
        success=True,
        output={"text": f"token Bearer {TOKEN}"},
    )
    data = journal.entries[-1].data
    assert data["arguments"] == {"headers": {"Authorization": "***"}, "url": "https://e.x/?key=***", "note": "*** ***"}
    assert data["output_summary"] == '{"text": "token ***"}'


@pytest.mark.anyio
async def test_a_call_the_runs_end_cuts_off_is_logged_masked_all_the_same() -> None:
    journal = RunJournal("r", 10)
    started = anyio.Event()

    async def hanging(arguments: dict[str, Any]) -> ToolOutcome:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("not reached")

    call = journal.guard(ToolSpec("web.fetch", "", {}, "web"), hanging)
    with anyio.fail_after(10), anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call, {"url": f"https://e.x/?key={KEY}"})
            await started.wait()
            scope.cancel()
    [entry] = journal.entries
    assert entry.data["arguments"] == {"url": "https://e.x/?key=***"} and entry.data["success"] is False
