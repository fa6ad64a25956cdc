"""The wire between the agent and a trainer process: the typed plan in, the typed
events out, the warm trainer, and the executor's metrics."""
