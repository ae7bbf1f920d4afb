#!/usr/bin/env bash
# Session 21, call C: index tensors and batched products without torch.broadcast_shapes/expand.
# 90496cb (before) against this tree: per-statement cost of interpolate_bilinear at batch 1; the corpus/torch
# problems whose forwards called torch.broadcast_shapes, at batch 1, full size, strict, through the verifier.
# Before it: git archive 90496cb | gzip > .device/c21/head.tgz; run from the repository root: bash .device/c21/c.sh (OUT set).
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/headtree && tar xzf .device/c21/head.tgz -C /tmp/headtree
cp benchmarks/forward_cost.py /tmp/headtree/benchmarks/
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
mkdir -p /tmp/sel && for n in interpolate_bilinear upsample_nearest causal_self_attention transformer_encoder_layer \
  transformer_decoder_layer transformer_encoder_stack rmsnorm_llama where_clamp_cumsum; do cp corpus/torch/$n.py /tmp/sel/; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/sel/*.py && python3 benchmarks/at_batch_one.py /tmp/sel/ >> $OUT/gpu.log 2>&1
for round in 1 2; do
  echo "== round $round, 90496cb" >> $OUT/forward.log
  (cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 100 python3 benchmarks/forward_cost.py /tmp/sel/interpolate_bilinear.py --trials 100) 2>&1 | grep -v Warning | grep "^#\|eager\|compile\|index_kernel\|_ishape\|return" >> $OUT/forward.log
  echo "== round $round, this tree" >> $OUT/forward.log
  PYTHONPATH=$PWD timeout 100 python3 benchmarks/forward_cost.py /tmp/sel/interpolate_bilinear.py --trials 100 2>&1 | grep -v Warning | grep "^#\|eager\|compile\|index_kernel\|_ishape\|return" >> $OUT/forward.log
done
(cd /tmp/headtree && PYTHONPATH=/tmp/headtree timeout 200 python3 -m drtriton.cli bench /tmp/sel --policy builtin --mode strict --device cuda --budget 15 --workers 4 --out $OUT/before) >> $OUT/gpu.log 2>&1
PYTHONPATH=$PWD timeout 200 python3 -m drtriton.cli bench /tmp/sel --policy builtin --mode strict --device cuda --budget 15 --workers 4 --out $OUT/after >> $OUT/gpu.log 2>&1
for d in before after; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg $OUT/$d/summary.json; done
