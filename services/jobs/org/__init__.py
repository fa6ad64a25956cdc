"""OrgService, served by the jobs process: an org's keys (`keys.py`), its audit trail
(`trail.py`) and its limits (`limits.py`); `servicer.py` is the gRPC face."""
