#!/usr/bin/env bash
# Session 23, call G: slices and selects read only by a cat picked in the kernel (no view in forward)
# (drtriton/policy/recompute.py, Pick). e5bfb35 and dfd1434 (before) against this tree,
# strict, through the verifier: rotary embeddings (corpus/torch, full size and batch 1), Llama
# (rotary) and GPT-2 (its gelu's products merged as siblings since dfd1434), full size.
# Before it: git archive e5bfb35 | gzip > .device/c23/head.tgz, git archive dfd1434 | gzip >
# .device/c23/dfd.tgz; run from the repository root:
# bash .device/c23/g.sh (OUT set).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/e5bfb35 /tmp/dfd1434 && tar xzf .device/c23/head.tgz -C /tmp/e5bfb35 && tar xzf .device/c23/dfd.tgz -C /tmp/dfd1434
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
mkdir -p /tmp/sel /tmp/b1
cp corpus/torch/rotary_embedding.py /tmp/sel/; cp corpus/torch/rotary_embedding.py /tmp/b1/rotary_embedding_b1.py
for n in llama gpt2; do cp corpus/transformers/$n.py /tmp/sel/; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/sel/*.py /tmp/b1/*.py && python3 benchmarks/at_batch_one.py /tmp/b1/ >> $OUT/gpu.log 2>&1
cp /tmp/b1/*.py /tmp/sel/
for tree in e5bfb35 dfd1434 after; do
  if [ $tree = after ]; then dir=$PWD; else dir=/tmp/$tree; fi
  (cd $dir && PYTHONPATH=$dir timeout 170 python3 -m drtriton.cli bench /tmp/sel --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/$tree) >> $OUT/gpu.log 2>&1
done
for d in e5bfb35 dfd1434 after; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg; done
