"""What both sides of the executor wire need, importing no service: the model catalog
and the fixture's architecture, step planning, and the rows a job trains on (parsing,
selection, the checks of a create, the frozen snapshot)."""
