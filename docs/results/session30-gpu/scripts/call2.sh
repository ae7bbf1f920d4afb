#!/usr/bin/env bash
# Session 30, call 2: A/B (A = c1e2f3d from its own folder, B = the working tree: segment
# reductions, tables read through stored ids in their readers) on the segment problems and
# BERT and GPT-2 at full sizes.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
(cd .device/c30/treeA && PYTHONPATH=$PWD timeout 260 python3 -m drtriton.cli bench ../p2 --policy builtin --mode strict \
  --device cuda --budget 30 --workers 6 --out $OUT/benchA > $OUT/benchA.log 2>&1; echo "bench A rc=$?" >> $OUT/gpu.log)
PYTHONPATH=$PWD timeout 260 python3 -m drtriton.cli bench .device/c30/p2 --policy builtin --mode strict \
  --device cuda --budget 30 --workers 6 --out $OUT/benchB > $OUT/benchB.log 2>&1
echo "bench B rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
