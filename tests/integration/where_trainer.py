"""A trainer that says where it runs (its working directory, argv, a few variables and
whether it runs as `__main__`), writes a line on stderr and ends with a result:
`python -m tests.integration.where_trainer task.json`, for tests/integration/test_warm.py."""

import json
import os
import sys

from executor.wire.protocol import emit
from trainyard.training import events

if __name__ == "__main__":
    emit(events.Status("accepted"))
    seen = {
        "cwd": os.getcwd(),
        "argv": sys.argv[1:],
        "main": __name__,
        **{
            name: os.environ.get(name)
            for name in ("WARM_PROBE", "WARM_ONLY", "TORCH_EXTENSIONS_DIR")
        },
    }
    emit(events.Log(json.dumps(seen, sort_keys=True)))
    print("where_trainer: a line on stderr", file=sys.stderr, flush=True)
    emit(events.Result(step=1, served_step=1, checkpoint_step=1, base_sha256="0" * 64))
