"""`python -m executor.scripted task.json`: the scripted trainer (events without a model),
for exercising the executor wire quickly (`executor.trainers.scripted`)."""

import sys

from executor.trainers.main import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], "scripted"))
