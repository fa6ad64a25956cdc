"""ClaimService: executors, tasks and leases — the executor wire."""
