"""Training-client engines: a base held in memory and trained call by call."""
