# Session 34, call 6 (one H200): this session's GPU tests at 92055b4 (the reviewed arbiter, the
# grouped product's group-count check).
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD/.device/c34/tf:$PWD
timeout 170 python3 -m pytest tests/test_verifier_gpu.py -k "mixture or long_rows" -q -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
grep -E "passed|failed|^FAILED|^E " $OUT/gpu_tests.log | head
