#!/usr/bin/env bash
# The tiny recipe on one GPU (docs/benchmarks.md, "Training"): SFT, then DRPO and GRPO from the
# same SFT checkpoint, side by side on the same GPU for the same time.
#   benchmarks/train_tiny_gpu.sh sft RUN [ARGS]     -> RUN/sft (data taught by the built-in policy, verified)
#   benchmarks/train_tiny_gpu.sh rl RUN SECONDS     -> RUN/drpo and RUN/grpo from RUN/sft/model
# Needs drtriton installed with the training extra; HF_HUB_OFFLINE=1 (nothing is downloaded).
set -euo pipefail
stage=$1 run=$2
case $stage in
  sft)
    drtriton-train sft --recipe tiny --device cuda --teacher-pools 4 --verifier-workers 4 --out "$run/sft" "${@:3}" ;;
  rl)
    seconds=$3
    for algorithm in drpo grpo; do
      drtriton-train drpo --recipe tiny --algorithm $algorithm --device cuda --verifier-workers 6 \
        --init "$run/sft/model" --time-limit "$seconds" --out "$run/$algorithm" > "$run/$algorithm.log" 2>&1 &
    done
    wait ;;
  *) echo "usage: $0 sft RUN | rl RUN SECONDS" >&2; exit 2 ;;
esac
