#!/usr/bin/env bash
# Session 28, call 2: compaction and long scans, the session's start tree (A, db7fe0e) against
# this tree (B) on the same problems, one call: the chunked cumsum and the masked-update lowerings.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 280 python3 -m drtriton.cli bench .device/c28/p2 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/benchB > $OUT/benchB.log 2>&1
echo "bench B rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD/.device/c28/treeA timeout 250 python3 -m drtriton.cli bench .device/c28/p2 --policy builtin --mode strict \
  --device cuda --budget 20 --workers 8 --out $OUT/benchA > $OUT/benchA.log 2>&1
echo "bench A rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
