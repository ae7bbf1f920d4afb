#!/usr/bin/env bash
# Session 21, call B: pointwise problems through the verifier's bench, 67ed608 against this tree;
# corpus/torch at batch 1, strict, full size (this tree). Run from the repository root: bash .device/c20/b.sh (OUT set).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c20/head.tgz -C /tmp/headtree
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
cp -r benchmarks/pointwise /tmp/pointwise
(cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 140 python3 -m drtriton.cli bench /tmp/pointwise --policy builtin --mode strict --device cuda --budget 15 --workers 4 --out $OUT/pw_before) >> $OUT/gpu.log 2>&1
PYTHONPATH=$PWD timeout 140 python3 -m drtriton.cli bench /tmp/pointwise --policy builtin --mode strict --device cuda --budget 15 --workers 4 --out $OUT/pw_after >> $OUT/gpu.log 2>&1
for d in pw_before pw_after; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg $OUT/$d/summary.json $OUT/$d/report.md; done
PYTHONPATH=$PWD OUT=$OUT/torch_b1 BATCH_ONE=1 FOLDER_LIMIT=280 WORKERS=5 bash benchmarks/corpus_gpu.sh strict 5 torch >> $OUT/gpu.log 2>&1
