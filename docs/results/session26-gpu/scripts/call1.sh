#!/usr/bin/env bash
# Session 26, call 1: the attention tests and the GPU tests on this tree, then plan_ab on the
# attention problems and two decoders. Run from the repository root with .device/c26 carried.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
git log -1 --format=%h >> $OUT/gpu.log; git status --short | head -30 >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 240 python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts="-ra" \
  tests/test_verifier_gpu.py tests/test_recompose.py tests/test_policy_pool_scan_loss.py -k "attention or gpu or recompose or rms" > $OUT/gpu-tests.log 2>&1
echo "tests rc=$?" >> $OUT/gpu.log; tail -5 $OUT/gpu-tests.log >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 330 python3 benchmarks/plan_ab.py time --a .device/c26/gA --b .device/c26/gB --json $OUT/ab-call1.json \
  benchmarks/attention/eager_gqa.py benchmarks/attention/bert_padding.py benchmarks/attention/sdpa_bool_mask.py \
  .device/c26/probs/qwen3.py .device/c26/probs/opt.py >> $OUT/gpu.log 2>&1
echo "ab rc=$?" >> $OUT/gpu.log
