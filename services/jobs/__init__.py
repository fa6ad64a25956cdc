"""JobService: jobs, attempts, the model catalog, estimates, dataset snapshots, events."""
