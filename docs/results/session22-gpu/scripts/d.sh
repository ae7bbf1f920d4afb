#!/usr/bin/env bash
# Session 22, call D: index arithmetic recomputed where it is read (drtriton/policy/recompute.py).
# df9eb08 (before) against this tree, strict, through the verifier: corpus/torch's two upsampling
# problems at full size and made batch 1. Before it: git archive df9eb08 | gzip > .device/c22/head.tgz;
# run from the repository root: bash .device/c22/d.sh (OUT set).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c22/head.tgz -C /tmp/headtree
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
mkdir -p /tmp/sel /tmp/b1
for n in interpolate_bilinear upsample_nearest; do cp corpus/torch/$n.py /tmp/sel/; cp corpus/torch/$n.py /tmp/b1/${n}_b1.py; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/sel/*.py /tmp/b1/*.py && python3 benchmarks/at_batch_one.py /tmp/b1/ >> $OUT/gpu.log 2>&1
cp /tmp/b1/*.py /tmp/sel/
for tree in before after; do
  if [ $tree = before ]; then dir=/tmp/headtree; else dir=$PWD; fi
  (cd $dir && PYTHONPATH=$dir timeout 260 python3 -m drtriton.cli bench /tmp/sel --policy builtin --mode strict --device cuda --budget 15 --workers 4 --out $OUT/$tree) >> $OUT/gpu.log 2>&1
done
for d in before after; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg; done
