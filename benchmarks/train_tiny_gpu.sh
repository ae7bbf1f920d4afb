#!/usr/bin/env bash
# The tiny recipe on one GPU (docs/benchmarks.md, "Training"): SFT data taught by the built-in policy,
# SFT, then DRPO and GRPO from the same SFT checkpoint with seeds 0 and 1 (all four at once, side by
# side on the GPU), then the checkpoints on the same held-out programs.
#   benchmarks/train_tiny_gpu.sh teach RUN SECONDS [ARGS]  -> RUN/sft/data (any machine: on a CPU the
#                                                             kernels run in the interpreter; again with
#                                                             --seed N adds pairs)
#   benchmarks/train_tiny_gpu.sh sft RUN [ARGS]            -> RUN/sft/model (teaches first if RUN/sft/data is empty)
#   benchmarks/train_tiny_gpu.sh rl RUN SECONDS [ARGS]     -> RUN/{drpo,grpo}_s{0,1}; run again with --resume
#                                                             (and --max-steps N) to go on from the checkpoints
#   benchmarks/train_tiny_gpu.sh eval RUN [ARGS]           -> RUN/eval_{sft,drpo_s0,...}: every RUN/*/model on 200 held-out
#                                                             1-operator programs each (add --pass-k 4, --ks 1,2,3)
#   benchmarks/train_tiny_gpu.sh plot RUN                  -> RUN/rl.svg: held-out pass@1 and rewards by step
# Needs drtriton installed with the training extra; HF_HUB_OFFLINE=1 (nothing is downloaded).
set -euo pipefail
stage=$1 run=$2
runs="drpo_s0 drpo_s1 grpo_s0 grpo_s1"
# runs side by side: run i on the i-th GPU this job may use (CUDA_VISIBLE_DEVICES, else every GPU
# nvidia-smi lists; none on a CPU machine), round robin, each with its share of the cores as
# verifier workers
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -ra visible <<< "$CUDA_VISIBLE_DEVICES"
else
  read -ra visible <<< "$({ nvidia-smi -L 2>/dev/null || true; } | awk '{printf "%d ", NR - 1}')"
fi
[ "${#visible[@]}" -ge 1 ] || visible=(0)
workers() { local n=$1; echo $(( $(nproc) / n > 3 ? $(nproc) / n - 1 : 2 )); }
on_gpu() { echo "${visible[$(( $1 % ${#visible[@]} ))]}"; }
case $stage in
  teach)
    drtriton-train teach --recipe tiny --time-limit "$3" --out "$run/sft" "${@:4}" ;;
  sft)
    drtriton-train sft --recipe tiny --device cuda --teacher-pools 4 --verifier-workers 4 --out "$run/sft" "${@:3}" ;;
  rl)
    seconds=$3 i=0 w=$(workers 4)
    for name in $runs; do
      CUDA_VISIBLE_DEVICES=$(on_gpu $i) drtriton-train drpo --recipe tiny --algorithm "${name%_s*}" --seed "${name#*_s}" \
        --device cuda --verifier-workers "$w" --host-workers $(( w * 4 )) \
        --init "$run/sft/model" --time-limit "$seconds" --out "$run/$name" "${@:4}" >> "$run/$name.log" 2>&1 &
      i=$((i + 1))
    done
    wait ;;
  eval)
    # every checkpoint in RUN/*/model: sft, the RL runs, and any other (RUN/sft/data copied to RUN/NAME/data,
    # then `drtriton-train sft --out RUN/NAME --hidden 384`: the same pairs on a model of another size)
    models=()
    for model in "$run"/*/model; do [ -e "$model/config.json" ] && models+=("$model"); done
    i=0 w=$(workers ${#models[@]})
    for model in "${models[@]}"; do
      name=$(basename "$(dirname "$model")")
      CUDA_VISIBLE_DEVICES=$(on_gpu $i) drtriton-train eval --recipe tiny --device cuda --init "$model" --heldout 200 \
        --ks 1 --verifier-workers "$w" --host-workers $(( w * ${#models[@]} )) --out "$run/eval_$name" "${@:3}" > "$run/eval_$name.log" 2>&1 &
      i=$((i + 1))
    done
    wait
    grep -H "^\[eval\] synthetic k=[0-9]*:" "$run"/eval_*.log || true ;;
  plot)
    python "$(dirname "$0")/plot_rl.py" $(for name in $runs; do echo "$run/$name"; done) --out "$run/rl.svg" ;;
  *) echo "usage: $0 teach RUN SECONDS | sft RUN | rl RUN SECONDS [--resume --max-steps N] | eval RUN | plot RUN" >&2; exit 2 ;;
esac
