#!/usr/bin/env bash
# Session 29, call 5: the compaction problems again at a8f32a6 (the count from a sum of the mask
# instead of the cumsum's last element, after the review).
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 240 python3 -m drtriton.cli bench .device/c29/p5 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/bench5 > $OUT/bench5.log 2>&1
echo "bench5 rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg $OUT/*/verdicts.jsonl
