#!/usr/bin/env bash
# Session 24, call I: CLIP vision alone (call H rejected it: repeated inputs ran 1.5x faster than
# new ones, timed while the bench compiled the next problems), then the architectures this
# session's capture fixes made convertible (SigLIP vision, transformers' MobileNetV2 and ResNet,
# Bloom, Falcon) at larger sizes, strict, beside eager and torch.compile.
# Run from the repository root: bash .device/c24/i.sh
set -u
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.log
PYTHONPATH=$PWD timeout 150 python3 -m drtriton.cli bench .device/c24/clip --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/clip >> $OUT/gpu.log 2>&1
echo "clip rc=$?" >> $OUT/gpu.log
PYTHONPATH=$PWD timeout 400 python3 -m drtriton.cli bench .device/c24/probs2 --policy builtin --mode strict --device cuda --budget 30 --workers 5 --out $OUT/fixed >> $OUT/gpu.log 2>&1
echo "fixed rc=$?" >> $OUT/gpu.log
rm -rf $OUT/*/candidates $OUT/*/*.svg
