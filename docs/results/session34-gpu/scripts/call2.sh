# Session 34, call 2 (one H200): call 1's A/B again with transformers 5.24 carried (trimmed to the
# two models: .device/c34/tf), the version the plans are made with on the CPU; the machine's 5.17
# failed both plans in forward (a None read as a tensor). A = HEAD's mixed plan (histc on integers in
# PyTorch, the experts as every row through every expert), B = this tree's strict plan.
set -x
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD/.device/c34/tf:$PWD
python3 -c "import transformers; print(transformers.__version__, transformers.__file__)"
M="benchmarks/moe/mixtral_layers.py benchmarks/moe/olmoe_layers.py"
(cd .device/c34/A && PYTHONPATH=$OLDPWD/.device/c34/tf:. timeout 200 python3 benchmarks/plan_ab.py make --mode mixed --out $OLDPWD/.device/moeA $(for f in $M; do echo $OLDPWD/$f; done)) > $OUT/make.log 2>&1
timeout 200 python3 benchmarks/plan_ab.py make --out .device/moeB $M >> $OUT/make.log 2>&1
grep -v "^ " $OUT/make.log | cut -c1-200
timeout 330 python3 benchmarks/plan_ab.py time --a .device/moeA --b .device/moeB --json $OUT/ab_moe.json --trials 20 $M > $OUT/ab_moe.log 2>&1
cut -c1-1500 $OUT/ab_moe.log
python3 -c "
import json; r = json.load(open('$OUT/ab_moe.json'))
for k, v in r.items(): print(k, json.dumps(v.get('top_kernels', v.get('error', ''))[:1500] if isinstance(v.get('top_kernels'), str) else v.get('top_kernels', v.get('error')))[:1500])
"
