#!/usr/bin/env bash
# One short check for a machine with an accelerator: the trainer's throughput on the
# fixture model (CUDA, bf16 where supported), at two batch sizes. Prints its figures.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
"$PY" -m bench.trainer --steps 60 --batch 4
"$PY" -m bench.trainer --steps 60 --batch 32 --seq 512
