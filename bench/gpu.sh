#!/usr/bin/env bash
# The check for a machine with one GPU, within 8 minutes: a random-initialised Qwen2 of
# ~0.5B parameters built in code (bench/gpu_model.py) in a temporary TRAINYARD_MODELS_DIR,
# trained as a LoRA job and as a full job with bf16 mixed precision and ZeRO stage 2, each
# beside the same recipe run as a bare DeepSpeed loop (bench/training.py --through
# trainer: the job's trainer started as the executor starts it). Prints, for each, the
# tokens/s of both and their ratio, MFU, peak GPU memory and the loss difference.
#
# The options are the hyperparameters `mixed_precision` and `zero_stage` (issue 29, item
# 3); a checkout without them refuses the job at admission, naming the field.
#
#   bench/gpu.sh            PYTHON=… picks the interpreter (.venv/bin/python by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
STEPS=${GPU_CHECK_STEPS:-30}

fail() { echo "bench/gpu.sh: $*" >&2; exit 2; }
command -v nvidia-smi >/dev/null || fail "no nvidia-smi: this check needs an NVIDIA GPU"
gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1) \
  || fail "nvidia-smi sees no GPU"
[[ -n "$gpu" ]] || fail "nvidia-smi sees no GPU"
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || fail "torch sees no CUDA device (is the CUDA build of torch installed?)"
echo "GPU: $gpu"

export TRAINYARD_MODELS_DIR
TRAINYARD_MODELS_DIR=$(mktemp -d)
trap 'rm -rf "$TRAINYARD_MODELS_DIR"' EXIT
started=$SECONDS
"$PY" -m bench.gpu_model "$TRAINYARD_MODELS_DIR/qwen2-half"

# 16 chats of ~400 words a device a step, bf16 weights, bf16 compute, ZeRO-2.
run() {
  echo
  echo "== $1, bf16, ZeRO-2 =="
  timeout 220 "$PY" bench/training.py --through trainer --base qwen2-half --mode "$1" \
    --steps "$STEPS" --batch 16 --words 400 --hp base_load_precision=bf16 \
    --hp mixed_precision=bf16 --hp zero_stage=2
}
run lora
run full
echo
echo "done in $((SECONDS - started)) s"
