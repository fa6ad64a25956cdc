"""A trainer that is still starting (importing, say) and has set no SIGTERM handler yet:
`python -m tests.unit.sleeping_trainer task.json`, for tests/unit/test_runner.py."""

import time

if __name__ == "__main__":
    time.sleep(60)
