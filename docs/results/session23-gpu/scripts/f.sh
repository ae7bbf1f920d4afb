#!/usr/bin/env bash
# Session 23, call F: a cat read elementwise computed in its readers, and pointwise siblings in one
# kernel (drtriton/policy/recompute.py, Program._siblings). e5bfb35 (before) against this tree,
# strict, through the verifier: rotary embeddings (corpus/torch, full size and batch 1) and the
# corpus/transformers models with rotary embeddings (Llama, Mistral, Qwen2), full size. Then the GPU
# tests (time_graph now draws through TimedInputs). Before it: git archive e5bfb35 | gzip >
# .device/c23/head.tgz; run from the repository root: bash .device/c23/f.sh (OUT set).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c23/head.tgz -C /tmp/headtree
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
mkdir -p /tmp/sel /tmp/b1
cp corpus/torch/rotary_embedding.py /tmp/sel/; cp corpus/torch/rotary_embedding.py /tmp/b1/rotary_embedding_b1.py
for n in llama mistral qwen2; do cp corpus/transformers/$n.py /tmp/sel/; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/sel/*.py /tmp/b1/*.py && python3 benchmarks/at_batch_one.py /tmp/b1/ >> $OUT/gpu.log 2>&1
cp /tmp/b1/*.py /tmp/sel/
for tree in before after; do
  if [ $tree = before ]; then dir=/tmp/headtree; else dir=$PWD; fi
  (cd $dir && PYTHONPATH=$dir timeout 200 python3 -m drtriton.cli bench /tmp/sel --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/$tree) >> $OUT/gpu.log 2>&1
done
for d in before after; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg; done
PYTHONPATH=$PWD timeout 170 python3 -m pytest -q -x tests/test_verifier_gpu.py tests/test_direct_launch.py tests/test_cuda_graph.py >> $OUT/gpu.log 2>&1
echo "tests exit $?" >> $OUT/gpu.log
