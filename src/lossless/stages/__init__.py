"""The no-LLM pipeline stages, cheapest first. See ``base`` for the contract."""
