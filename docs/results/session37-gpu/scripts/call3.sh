# Session 37, call 3 (one H200): the product path with values kept per shape (drtriton convert,
# strict, the verifier's GPU trials and timing, whose launches must match call to call), and
# the GPU verifier tests (reward and timing hacks, honest candidates, CUDA graphs).
set -x
cd "$(dirname "$0")/../../../.."
timeout 200 python3 -m drtriton.cli convert corpus/transformers/t5_encoder.py --mode strict --budget 150 --json \
    --out $OUT/t5_encoder_triton.py > $OUT/convert_t5.json 2> $OUT/convert_t5.err
head -c 1500 $OUT/convert_t5.json
timeout 300 python3 -m pytest tests/test_verifier_gpu.py -q -x -p no:cacheprovider \
    -k "reward_hack or timing_hack or honest or cuda_graph" > $OUT/gputests.log 2>&1
tail -5 $OUT/gputests.log
