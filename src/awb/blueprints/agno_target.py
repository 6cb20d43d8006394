"""The optional Agno target (extra `[agno]`): the same blueprint as an Agno Agent, Team or Workflow, for
users who run Agno. Telemetry is always off (`AGNO_TELEMETRY=false` and `telemetry=False`).

Supported here: OpenAI-compatible heads (`OPENAI_BASE_URL` / `OPENAI_API_KEY`), `tavily_search` arms (our
own client, so `allowed_domains` is enforced and calls are logged the same way), memory as Agno chat
history, `max_tool_calls` as Agno's `tool_call_limit` and `timeout_seconds` around the run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from awb.blueprints.errors import GuardrailViolated
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import Blueprint, TavilySearchArm
from awb.blueprints.tavily import DEFAULT_BASE_URL, tavily_handler, tavily_spec
from awb.errors import Unavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

# Set before Agno is imported anywhere through this module, and again at every compile.
os.environ["AGNO_TELEMETRY"] = "false"


def _require_agno() -> None:
    try:
        import agno  # noqa: F401
    except ImportError:
        raise Unavailable("the agno target needs the agno extra: pip install 'agent-workbench[agno]'") from None


def _model(blueprint: Blueprint, environ: Mapping[str, str]) -> Any:
    head = blueprint.head
    if head.provider != "openai":
        raise Unavailable(f"the agno target supports openai heads only, not {head.provider!r}", provider=head.provider)
    from agno.models.openai import OpenAIChat

    return OpenAIChat(
        id=head.model,
        temperature=head.temperature,
        max_tokens=head.max_tokens,
        api_key=environ.get("OPENAI_API_KEY") or "not-set",
        base_url=environ.get("OPENAI_BASE_URL"),
        max_retries=0,
    )


def _tools(blueprint: Blueprint, environ: Mapping[str, str], tavily_base_url: str, journal: RunJournal) -> list[Any]:
    tools: list[Any] = []
    for arm in blueprint.arms:
        if not isinstance(arm, TavilySearchArm):
            raise Unavailable(f"the agno target does not support {arm.type!r} arms yet", arm=arm.type)
        spec = tavily_spec(arm)
        handler = journal.guard(
            spec,
            tavily_handler(
                arm,
                api_key=environ.get("TAVILY_API_KEY"),
                base_url=tavily_base_url,
                allowed_domains=blueprint.spine.allowed_domains,
                journal=journal,
            ),
        )
        tools.append(_tavily_function(handler))
    return tools


def _tavily_function(handler: Callable[[dict[str, Any]], Awaitable[Any]]) -> Callable[[str], Awaitable[str]]:
    async def tavily_search(query: str) -> str:
        """Search the web for current information; returns results with title, url and content."""
        outcome = await handler({"query": query})
        return str(outcome.payload)

    return tavily_search


def compile_to_agno(
    blueprint: Blueprint,
    *,
    journal: RunJournal,
    environ: Mapping[str, str] | None = None,
    tavily_base_url: str = DEFAULT_BASE_URL,
) -> Any:
    """An Agno `Agent` (single_agent), `Team` (team) or `Workflow` (workflow) for `blueprint`."""
    os.environ["AGNO_TELEMETRY"] = "false"
    _require_agno()
    from agno.agent import Agent
    from agno.db.in_memory import InMemoryDb
    from agno.team import Team
    from agno.workflow import Step, Workflow

    env = os.environ if environ is None else environ
    memory = blueprint.heart.memory
    history: dict[str, Any] = {}
    if memory.enabled:
        history = {
            "db": InMemoryDb(),  # type: ignore[no-untyped-call]
            "add_history_to_context": True,
            "num_history_runs": memory.history_length,
        }
    limit = blueprint.spine.max_tool_calls

    def agent(name: str, instructions: str, role: str | None = None, **extra: Any) -> Any:
        return Agent(
            name=name,
            role=role,
            model=_model(blueprint, env),
            instructions=instructions or None,
            tools=_tools(blueprint, env, tavily_base_url, journal),
            tool_call_limit=limit,
            telemetry=False,
            **extra,
        )

    prompt = blueprint.head.system_prompt
    legs = blueprint.legs
    if legs.mode == "team":
        members = [agent(m.name, m.instructions, m.role or None) for m in legs.members]
        return Team(
            name=blueprint.name,
            members=members,
            model=_model(blueprint, env),
            instructions=prompt or None,
            telemetry=False,
            **history,
        )
    if legs.mode == "workflow":
        steps: list[Any] = [
            Step(name=s.name, agent=agent(s.name, f"{prompt}\n\n{s.instructions}".strip())) for s in legs.steps
        ]
        return Workflow(name=blueprint.name, steps=steps, telemetry=False)
    return agent(blueprint.name, prompt, **history)


async def run_agno(
    target: Any, blueprint: Blueprint, message: str, *, journal: RunJournal, session_id: str | None = None
) -> str:
    """Run a compiled Agno target under the blueprint's spine; returns the answer text."""
    limit = blueprint.spine.timeout_seconds
    output: Any = None
    with anyio.move_on_after(limit) as scope:
        journal.scope = scope
        output = await target.arun(message, session_id=session_id)
    if scope.cancelled_caught and journal.violation is None:
        journal.violate("timeout_seconds", f"the run passed {limit} s", fatal=True, limit=limit)
    if journal.violation is not None:
        name = journal.violation["guardrail"]
        raise GuardrailViolated(f"guardrail {name} ended the run", guardrail=name, limit=journal.violation.get("limit"))
    return str(getattr(output, "content", output))
