#!/usr/bin/env bash
# Session 30, call 3: corpus/torch at full sizes, strict (a regression check of the working tree),
# then the GPU verifier and direct-launch tests.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
OUT=$OUT/corpus FOLDER_LIMIT=330 WORKERS=6 timeout 380 bash benchmarks/corpus_gpu.sh strict 15 torch > $OUT/corpus.log 2>&1
echo "corpus rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 190 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_direct_launch.py -k "not attention and not corpus" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -8 $OUT/gpu-tests.log >> $OUT/gpu.log
