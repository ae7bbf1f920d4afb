# Session 34, call 1 (one H200): integer histc against CUDA's kernel; the GPU test of a mixture of
# experts; the grouped product against the experts' count times the FLOPs (plan_ab, A = HEAD's
# mixed plan, B = this tree's strict plan), beside eager and torch.compile.
set -x
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD
S=docs/results/session34-gpu/scripts
python3 $S/histc_int_cuda.py > $OUT/histc_int.jsonl 2>&1
timeout 200 python3 -m pytest tests/test_verifier_gpu.py -k "mixture" -q -p no:cacheprovider -x > $OUT/gpu_test.log 2>&1
tail -3 $OUT/gpu_test.log
M="benchmarks/moe/mixtral_layers.py benchmarks/moe/olmoe_layers.py"
(cd .device/c34/A && PYTHONPATH=. timeout 200 python3 benchmarks/plan_ab.py make --mode mixed --out $OLDPWD/.device/moeA $(for f in $M; do echo $OLDPWD/$f; done)) > $OUT/make.log 2>&1
timeout 200 python3 benchmarks/plan_ab.py make --out .device/moeB $M >> $OUT/make.log 2>&1
grep -v "^ " $OUT/make.log | cut -c1-300
timeout 300 python3 benchmarks/plan_ab.py time --a .device/moeA --b .device/moeB --json $OUT/ab_moe.json --trials 20 \
    $M > $OUT/ab_moe.log 2>&1
cat $OUT/histc_int.jsonl $OUT/ab_moe.log | cut -c1-600
