"""lossless for the OpenAI Agents SDK: a model-input filter over Responses items, and ``recall``.

    from lossless.adapters.openai_agents import Lossless
    rc = Lossless(max_output=32_000)   # the window: the agent's model's (window=N: one for all)
    agent = Agent(name="dev", instructions=INSTRUCTIONS, tools=[*TOOLS, rc.recall_tool])
    result = await Runner.run(agent, task, run_config=RunConfig(call_model_input_filter=rc), hooks=rc.hooks)

Before every model call the SDK hands the filter the whole input (Responses items) and
the instructions; the filter returns them made to fit, valid (every ``function_call``
answered, reasoning kept next to its calls).  The SDK keeps its own full history (and
session, if any): only what each call sends is compacted, and everything moved out comes
back through ``rc.recall_tool``.  The agent's tool schemas are counted with the instructions;
``rc.hooks`` (optional) hands the usage each response reports to the manager, which
calibrates its next estimate by it.

Without ``window=``, each call is budgeted by the window of the agent's model (its name, or
the SDK's default model) in the models' data; a model set only in ``RunConfig`` is not shown
to the filter: give ``window=`` then.

Run it without ``previous_response_id``/``conversation_id``: with those the server keeps the
history and each call sends only what is new, which no client-side filter can fit.

Needs ``pip install 'lossless[openai-agents]'``; the SDK is imported when ``recall_tool``
is first used.
"""

from __future__ import annotations

from typing import Any, Unpack

from ..manager import ContextManager, Prepared
from ._options import ManagerOptions, model_name
from ..tools import RECALL_TOOL
from .responses import ResponsesContext

__all__ = ["Lossless"]


class Lossless:
    """``ContextManager``'s arguments (or ``manager=``); call it as the SDK's
    ``call_model_input_filter``.  ``last`` is the view of the last call."""

    def __init__(self, manager: ContextManager | None = None, **kwargs: Unpack[ManagerOptions]) -> None:
        self.context = ResponsesContext(manager, **kwargs)
        self.manager = self.context.manager
        self.last: Prepared | None = None
        self._tool: Any = None
        self._hooks: Any = None

    def __call__(self, data: Any) -> Any:
        """``RunConfig.call_model_input_filter``: ``CallModelData`` → ``ModelInputData``."""
        from agents.run_config import ModelInputData

        model_data = data.model_data
        self.last = self.context.prepare(model_data.input, instructions=model_data.instructions,
                                         tools=_schemas(getattr(data.agent, "tools", None)),
                                         model=_model(getattr(data.agent, "model", None)))
        return ModelInputData(input=self.last.messages, instructions=model_data.instructions)

    @property
    def recall_tool(self) -> Any:
        """lossless's ``recall`` as the SDK's ``FunctionTool`` (answered by this manager's store)."""
        if self._tool is None:
            from agents import FunctionTool

            async def invoke(_ctx: Any, arguments: str) -> str:
                return self.context.run_tool(RECALL_TOOL["name"], arguments)

            self._tool = FunctionTool(name=RECALL_TOOL["name"], description=RECALL_TOOL["description"],
                                      params_json_schema=RECALL_TOOL["input_schema"], on_invoke_tool=invoke,
                                      strict_json_schema=False)
        return self._tool


    @property
    def hooks(self) -> Any:
        """The SDK's ``RunHooks`` (``Runner.run(..., hooks=rc.hooks)``): each response's usage
        calibrates the next estimate (see ``ContextManager.observe``)."""
        if self._hooks is None:
            from agents import RunHooks

            context = self.context

            class _Observe(RunHooks[Any]):
                async def on_llm_end(self, _ctx: Any, _agent: Any, response: Any) -> None:
                    context.observe(response.usage)

            self._hooks = _Observe()
        return self._hooks


def _model(model: Any) -> str:
    """The agent's model's name: its own, else the SDK's default (``OPENAI_DEFAULT_MODEL``)."""
    name = model_name(model)
    if name is None:
        from agents.models import get_default_model

        name = get_default_model()
    return name


def _schemas(tools: Any) -> list[dict[str, Any]] | None:
    """The agent's tools as the request carries them (for counting): name, description, schema."""
    if not tools:
        return None
    return [{"type": "function", "name": getattr(t, "name", ""), "description": getattr(t, "description", ""),
             "parameters": getattr(t, "params_json_schema", None)} for t in tools]
