#!/usr/bin/env bash
# Session 29, call 1: where compaction's time goes (kernel profile of the first plans, eager and
# torch.compile beside them), and a microbenchmark of compaction's scatter variants.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
timeout 120 python3 .device/c29/compact_micro.py > $OUT/micro.log 2>&1; echo "micro rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 300 python3 benchmarks/kernel_profile.py --mode strict --compile --calls 20 \
  benchmarks/operators/masked_select.py benchmarks/operators/nonzero.py benchmarks/operators/mask_elements.py \
  benchmarks/operators/mask_select_rows.py benchmarks/operators/unique_inverse.py \
  docs/results/session28-gpu/problems/adaptive_max_pool3d.py docs/results/session28-gpu/problems/take_along_dim_rows.py \
  docs/results/session28-gpu/problems/masked_rows_linear.py --out $OUT/profile > $OUT/profile.log 2>&1
echo "profile rc=$?" >> $OUT/gpu.log
