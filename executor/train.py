"""`python -m executor.train task.json`: the trainer process the executor runs for a task
(`TRAINYARD_TRAINER`'s default); the trainer is the one the registry finds for the job's
base (`executor.trainers`)."""

import os
import sys

from executor.trainers.main import main

# What a warm process imports ahead of its task (`executor.wire.warm`): what the trainers
# import inside their functions, and what their calls import on first use (transformers'
# schedules, DeepSpeed's expert-parallel layers, which `deepspeed.initialize` reads for
# any model). peft brings transformers; bases builds the fixture model.
PRELOAD = (
    "torch",
    "torch.distributed",
    "deepspeed",
    "deepspeed.module_inject.auto_ep_layer",
    "peft",
    "safetensors.torch",
    "transformers.optimization",
    "executor.models.bases",
    "executor.trainers.registry",
    "executor.trainers.language.run",
)

if __name__ == "__main__":
    code = main(sys.argv[1])
    # Its result is said and its files are closed: the interpreter's teardown of torch and
    # DeepSpeed (a second or more) would only hold back the executor, which waits for the
    # process to end before reporting the result.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
