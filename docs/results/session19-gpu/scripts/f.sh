#!/usr/bin/env bash
# Call F: after the fix (timed launches become the expected ones after a retune): corpus/torch at batch 1, strict, full size.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD OUT=$OUT/torch_b1 BATCH_ONE=1 FOLDER_LIMIT=330 WORKERS=5 bash benchmarks/corpus_gpu.sh strict 5 torch >> $OUT/gpu.log 2>&1
