"""The built-in architectures (the fixture LLM, the decider) and how a base is loaded."""
