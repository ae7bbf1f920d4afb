#!/usr/bin/env bash
# Session 22, call G: (1) the two upsampling problems at full size in mixed mode (cuDNN's convolution,
# the recomputed upsampling in a Triton epilogue); (2) the replay check's rejections of call F
# (rmsnorm_llama, rotary_embedding at batch 1, strict) with one verification at a time, twice.
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
mkdir -p /tmp/up /tmp/rep
for n in interpolate_bilinear upsample_nearest; do cp corpus/torch/$n.py /tmp/up/; done
for n in rmsnorm_llama rotary_embedding; do cp corpus/torch/$n.py /tmp/rep/${n}_b1.py; done
sed -i 's/^SIZE = "small"/SIZE = "full"/' /tmp/up/*.py /tmp/rep/*.py && python3 benchmarks/at_batch_one.py /tmp/rep/ >> $OUT/gpu.log 2>&1
PYTHONPATH=$PWD timeout 200 python3 -m drtriton.cli bench /tmp/up --policy builtin --mode mixed --device cuda --budget 15 --workers 4 --out $OUT/mixed >> $OUT/gpu.log 2>&1
for round in 1 2; do
  PYTHONPATH=$PWD timeout 150 python3 -m drtriton.cli bench /tmp/rep --policy builtin --mode strict --device cuda --budget 15 --workers 1 --out $OUT/replay$round >> $OUT/gpu.log 2>&1
done
for d in mixed replay1 replay2; do rm -rf $OUT/$d/candidates $OUT/$d/*.svg; done
