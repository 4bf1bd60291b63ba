"""lossless in the agent frameworks: a few lines each, all over one ``ContextManager``.

- ``lossless.adapters.responses.ResponsesContext``: the manager over OpenAI Responses
  input items (what the OpenAI Agents SDK and ``client.responses.create`` speak);
- ``lossless.adapters.langchain``: a LangChain v1 agent middleware (extra ``langchain``);
- ``lossless.adapters.pydantic_ai``: a pydantic-ai history processor (extra ``pydantic-ai``);
- ``lossless.adapters.openai_agents``: an OpenAI Agents SDK model-input filter (extra
  ``openai-agents``).

Each wires the ``recall`` tool, so the model can bring back what was moved out of its
context.  Framework packages are imported only by the module that needs them.
"""
