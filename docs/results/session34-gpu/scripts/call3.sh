# Session 34, call 3 (one H200): sorts of long rows against torch.sort (exact, and timed); the GPU
# tests of this session (a mixture of experts with integer ids, long sorts through the verifier);
# the MoE layers and the sort problems' strict plans (this tree) beside eager and torch.compile.
set -x
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD/.device/c34/tf:$PWD
S=docs/results/session34-gpu/scripts
timeout 200 python3 $S/sort_long_cuda.py > $OUT/sort_long.jsonl 2>$OUT/sort_long.err
cut -c1-400 $OUT/sort_long.jsonl
timeout 150 python3 -m pytest tests/test_verifier_gpu.py -k "mixture or long_rows" -q -p no:cacheprovider > $OUT/gpu_tests.log 2>&1
grep -E "passed|failed|^FAILED" $OUT/gpu_tests.log
M="benchmarks/moe/mixtral_layers.py benchmarks/moe/olmoe_layers.py benchmarks/operators/sort_vocab_top_p.py benchmarks/operators/topk_vocab.py benchmarks/operators/argsort_expert_ids.py"
timeout 200 python3 benchmarks/plan_ab.py make --out .device/c3B $M > $OUT/make.log 2>&1
grep -v "^ " $OUT/make.log | cut -c1-200
timeout 260 python3 benchmarks/plan_ab.py time --a .device/none --b .device/c3B --json $OUT/ab.json --trials 20 $M > $OUT/ab.log 2>&1
grep -v "Warning\|warn\|^ \|^$\|Online\|split the\|important use\|softmax\.$" $OUT/ab.log | cut -c1-400
python3 -c "
import json; r = json.load(open('$OUT/ab.json'))
for k, v in r.items(): print(k, json.dumps(v.get('top_kernels', v.get('error')))[:700])
"
