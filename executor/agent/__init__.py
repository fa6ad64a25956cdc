"""The executor agent: the stream to ClaimService, leases and heartbeats, a runner per
task or training client, and their work directories."""
