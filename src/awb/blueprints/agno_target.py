"""The optional Agno target (extra `[agno]`): the same blueprint as an Agno Agent, Team or Workflow, for
users who run Agno. Telemetry is always off (`AGNO_TELEMETRY=false` and `telemetry=False`).

- head: OpenAI-compatible (`OPENAI_BASE_URL` / `OPENAI_API_KEY`) as Agno's `OpenAIChat`, Anthropic
  (`ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`) as Agno's `Claude`;
- arms: `mcp` and `workbench` as Agno's `MCPTools`, `tavily_search` over awb's own client;
- heart: memory as Agno chat history in an Agno db (a SQLite file, so a session goes on across runs and
  processes; in memory without one), knowledge as a `search_knowledge` function;
- spine: `max_tool_calls` by a tool hook across every member, `timeout_seconds` around the run.

Compiling connects nothing; `run_agno` connects the MCP arms for one run and closes them after it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from awb.blueprints.compile import RuntimeOptions, check_runtime
from awb.blueprints.errors import GuardrailViolated
from awb.blueprints.journal import RunJournal
from awb.blueprints.schema import Blueprint, Head, TavilySearchArm
from awb.errors import Unavailable
from awb.install_hint import install_hint

# Set before Agno is imported anywhere through this module, and again at every compile.
os.environ["AGNO_TELEMETRY"] = "false"

#: Output tokens asked for when the head names none (Anthropic requires a number; the awb runtime's default).
DEFAULT_MAX_TOKENS = 4096


def workspace_workbench(config_file: Path | None) -> list[str]:
    """The command that serves this workspace's workbench over stdio, for `workbench` arms: this Python's
    `awb start`, on the same config file (without one, on the same working directory and `AWB_*` settings).

    Over stdio the agent's workbench lives exactly as long as its run, needs no running server or token, and
    shares the workspace's inventory file with every other process on it, so what the agent crafts stays.
    """
    command = [sys.executable, "-m", "awb", "start", "--transport", "stdio"]
    if config_file is not None:
        command += ["--config", str(config_file.resolve())]
    return command


def _require_agno() -> None:
    try:
        import agno.tools.mcp  # noqa: F401
    except ImportError as err:
        raise Unavailable(f"the agno target needs the agno extra: {install_hint('agno')} ({err})") from None


def _key(key: str | None, base_url: str | None, hosted: str, provider: str) -> str:
    """The key Agno's client is given. The hosted API without its key is refused before Agno asks it,
    as the native runtime does (`awb.agents.models.http.needs_key`); a base URL of one's own may need
    none, and Agno's clients still want a string."""
    from awb.agents.errors import ModelError
    from awb.agents.models.http import needs_key

    missing = needs_key(key, base_url or hosted, hosted, provider)
    if missing is not None:
        raise ModelError(missing, attempts=0, status=None)
    return key or "not-set"


def _model(head: Head, environ: Mapping[str, str]) -> Any:
    if head.provider == "anthropic":
        from awb.agents.models import anthropic

        base_url = environ.get("ANTHROPIC_BASE_URL")
        key = _key(environ.get("ANTHROPIC_API_KEY"), base_url, anthropic.DEFAULT_BASE_URL, "Anthropic")
        try:
            from awb.blueprints.agno_heads import claude_class

            head_class = claude_class()
        except ImportError:
            raise Unavailable(
                "the agno target needs the anthropic SDK for anthropic heads: " + install_hint("agno"),
                provider=head.provider,
            ) from None
        client: dict[str, Any] = {"max_retries": 0}
        if base_url:
            client["base_url"] = base_url
        return head_class(
            id=head.model,
            temperature=head.temperature,
            max_tokens=head.max_tokens or DEFAULT_MAX_TOKENS,
            api_key=key,
            client_params=client,
        )
    if head.provider != "openai":
        raise Unavailable(f"the agno target has no model for provider {head.provider!r}", provider=head.provider)
    from awb.agents.models import openai

    base_url = environ.get("OPENAI_BASE_URL")
    key = _key(environ.get("OPENAI_API_KEY"), base_url, openai.DEFAULT_BASE_URL, "OpenAI")
    from awb.blueprints.agno_heads import CappedOpenAIChat

    return CappedOpenAIChat(
        id=head.model,
        temperature=head.temperature,
        max_tokens=head.max_tokens,
        api_key=key,
        base_url=base_url,
        max_retries=0,
    )


def _db(db_file: Path | None) -> Any:
    """Agno's session store: a SQLite file (async, off the event loop), or memory when there is no file."""
    if db_file is None:
        from agno.db.in_memory import InMemoryDb

        return InMemoryDb()  # type: ignore[no-untyped-call]
    try:
        from agno.db.sqlite import AsyncSqliteDb
    except ImportError:
        raise Unavailable("agno memory in a file needs SQLAlchemy: " + install_hint("agno")) from None
    db_file.parent.mkdir(parents=True, exist_ok=True)
    return AsyncSqliteDb(db_file=str(db_file))


def _tools(blueprint: Blueprint, options: RuntimeOptions, journal: RunJournal) -> list[Any]:
    """The arms (and knowledge) as Agno tools, in the blueprint's order; one list shared by every member."""
    from awb.blueprints.agno_arms import knowledge_function, mcp_toolkits, tavily_function

    toolkits = iter(mcp_toolkits(blueprint, options))
    tools: list[Any] = []
    for arm in blueprint.arms:
        if isinstance(arm, TavilySearchArm):
            tools.append(tavily_function(blueprint, arm, options, journal))
        else:
            tools.append(next(toolkits))
    knowledge = blueprint.heart.knowledge
    if knowledge.enabled and knowledge.knowledge_base and options.knowledge is not None:
        tools.append(knowledge_function(options.knowledge, knowledge.knowledge_base))
    return tools


def compile_to_agno(
    blueprint: Blueprint,
    options: RuntimeOptions,
    *,
    journal: RunJournal,
    db_file: Path | None = None,
) -> Any:
    """An Agno `Agent` (single_agent), `Team` (team) or `Workflow` (workflow) for `blueprint`.

    `options` are the awb runtime's: the environment (keys, base URLs), Tavily's root, the workbench for
    `workbench` arms (a URL or a command line: Agno connects by itself, never in-process), whether `mcp`
    arms may start commands, and the knowledge bases. `db_file` keeps memory across runs.
    """
    os.environ["AGNO_TELEMETRY"] = "false"
    _require_agno()
    check_runtime(blueprint, options)
    from agno.agent import Agent
    from agno.team import Team
    from agno.workflow import Step, Workflow

    from awb.blueprints.agno_arms import journal_hook

    env = options.environ
    memory = blueprint.heart.memory
    db = _db(db_file) if memory.enabled else None
    history: dict[str, Any] = {}
    if memory.enabled:
        history = {"db": db, "add_history_to_context": True, "num_history_runs": memory.history_length}
    tools = _tools(blueprint, options, journal)
    hooks = [journal_hook(journal)]

    def agent(name: str, instructions: str, role: str | None = None, **extra: Any) -> Any:
        return Agent(
            name=name,
            role=role,
            model=_model(blueprint.head, env),
            instructions=instructions or None,
            tools=list(tools),
            tool_hooks=hooks,
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
            model=_model(blueprint.head, env),
            instructions=prompt or None,
            tools=list(tools),
            tool_hooks=hooks,
            telemetry=False,
            **history,
        )
    if legs.mode == "workflow":
        steps: list[Any] = [
            Step(name=s.name, agent=agent(s.name, f"{prompt}\n\n{s.instructions}".strip())) for s in legs.steps
        ]
        workflow_history: dict[str, Any] = {}
        if memory.enabled:
            workflow_history = {
                "db": db,
                "add_workflow_history_to_steps": True,
                "num_history_runs": memory.history_length,
            }
        return Workflow(name=blueprint.name, steps=steps, telemetry=False, **workflow_history)
    return agent(blueprint.name, prompt, **history)


async def run_agno(
    target: Any, blueprint: Blueprint, message: str, *, journal: RunJournal, session_id: str | None = None
) -> str:
    """Run a compiled Agno target under the blueprint's spine, its MCP arms connected for this run only;
    returns the answer text. A session id continues that session's history when memory is on."""
    from awb.blueprints.agno_arms import close_dbs, connected, toolkits_of
    from awb.blueprints.sessions import check_run_input

    check_run_input(message, session_id)
    limit = blueprint.spine.timeout_seconds
    output: Any = None
    try:
        with anyio.move_on_after(limit) as scope:
            journal.scope = scope
            async with connected(toolkits_of(target)):
                output = await target.arun(message, session_id=session_id)
    finally:
        with anyio.CancelScope(shield=True):
            await close_dbs(target)
    if scope.cancelled_caught and journal.violation is None:
        journal.violate("timeout_seconds", f"the run passed {limit} s", fatal=True, limit=limit)
    if journal.violation is not None:
        name = journal.violation["guardrail"]
        raise GuardrailViolated(f"guardrail {name} ended the run", guardrail=name, limit=journal.violation.get("limit"))
    return str(getattr(output, "content", output))
