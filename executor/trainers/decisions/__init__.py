"""The decision trainer: the built-in decider trained on a job's decision rows."""
