# Session 34, call 5 (one H200): OLMoE through the product again, with the arbiter that moves
# parameters and, where the reference has no float64 run, judges by its fp32 runs nearby; then
# the GPU tests (as many as the time allows).
set -x
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD/.device/c34/tf:$PWD
mkdir -p $OUT/moe && cp benchmarks/moe/olmoe_layers.py $OUT/moe/
timeout 330 python3 -m drtriton.cli bench $OUT/moe --policy builtin --mode strict --budget 150 --workers 1 \
    --device cuda --out $OUT/olmoe_bench > $OUT/olmoe_bench.log 2>&1
rm -rf $OUT/moe
tail -3 $OUT/olmoe_bench.log | cut -c1-600
timeout 200 python3 -m pytest tests/test_verifier_gpu.py -q -p no:cacheprovider -x > $OUT/gpu_tests.log 2>&1
grep -E "passed|failed|^FAILED" $OUT/gpu_tests.log
