"""What a run shares with its subagents: the top-level budget, the tool-call and token ledger,
the deadline, the event channel, and how a subagent's own model is found."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from awb.agents.budget import Budget
from awb.agents.events import Emitter, RunEvent, masked
from awb.agents.models.settings import ModelSettings
from awb.agents.pricing import price_usd
from awb.agents.result import TerminationReason, Usage
from awb.agents.toolbox import ToolOutcome

if TYPE_CHECKING:
    from awb.agents.agent import Agent
    from awb.agents.models.base import Model

ModelResolver = Callable[["type[Agent]"], "Model | None"]
#: Runs a `run_code` action's code and says how it went (see `awb.planner`); may raise `StopRun`. The second
#: argument narrows the servers the plan may reach (a subagent's own `tools`); None leaves the runner's own.
CodeRunner = Callable[[str, "Collection[str] | None"], Awaitable[ToolOutcome]]


class StopRun(Exception):
    """Raised by a code runner (or a tool handler of the run) to end the run with a budget ending.

    `outcome` is what the call did before it stopped (a plan's calls so far): the run records it as the
    step's tool call and remembers it, so a partial result says what was done."""

    def __init__(
        self, reason: TerminationReason, message: str, *, outcome: ToolOutcome | None = None, **details: Any
    ) -> None:
        super().__init__(message)
        self.reason, self.message, self.details, self.outcome = reason, message, details, outcome


@dataclass
class RunScope:
    budget: Budget
    emit: Emitter = field(default_factory=Emitter)
    #: The run's settings; each agent's own `model_settings` sit beneath them.
    settings: ModelSettings | None = None
    #: The model a subagent declares (resolved from its spec), or None to use its parent's.
    own_model: ModelResolver = lambda agent: None
    deadline: float = math.inf
    #: What `run_code` actions run in; without one the model is told code mode is not available.
    code_runner: CodeRunner | None = None
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)

    def charge(self, model: object, spent: Usage) -> Usage:
        """Add one model call's usage to the run's ledger, priced; returns it with its cost."""
        cost = price_usd(model, spent.input_tokens, spent.output_tokens)
        priced = spent.model_copy(update={"cost_usd": cost})
        self.usage.add(priced)
        return priced

    def exhausted(self, *budgets: Budget) -> tuple[TerminationReason, str, dict[str, Any]] | None:
        """The first token or cost limit the run's usage has reached, if any."""
        used = self.usage
        for budget in (self.budget, *budgets):
            limits: list[tuple[TerminationReason, str, float | None, float]] = [
                ("max_tokens", "max_input_tokens", budget.max_input_tokens, used.input_tokens),
                ("max_tokens", "max_output_tokens", budget.max_output_tokens, used.output_tokens),
                ("max_tokens", "max_total_tokens", budget.max_total_tokens, used.total_tokens),
                ("max_cost", "max_cost_usd", budget.max_cost_usd, used.cost_usd or 0.0),
            ]
            for reason, name, limit, value in limits:
                if limit is not None and value >= limit:
                    return reason, f"the run's {name} budget is spent", {"limit": name, "max": limit, "used": value}
        return None

    @property
    def listening(self) -> bool:
        """Whether anyone receives the run's events: what only an event would carry need not be made."""
        return self.emit.listening

    async def tell(self, event: RunEvent) -> None:
        """Deliver `event`, its secrets masked, to whoever listens to the run."""
        if self.listening:
            await self.emit(await masked(event))
