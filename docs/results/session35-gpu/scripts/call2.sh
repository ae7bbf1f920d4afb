# Session 35, call 2 (one H200): the copying cat (each input copied into its place) against the
# element-by-element cat, A = 3de3e7f, B = this tree, strict first plans of five torchvision
# networks with concatenations (full size) and two cat problems; DenseNet-121 alone through
# drtriton bench (one worker: nothing else on the GPU).
set -x
cd "$(dirname "$0")/../../../.."
C=.device/c35
timeout 330 python3 benchmarks/plan_ab.py time --a $C/plansA --b $C/plansB --json $OUT/ab.json --trials 30 $C/full/*.py > $OUT/ab.log 2>&1
grep -v Warning $OUT/ab.log | grep -v warn | tail -12 | cut -c1-400
timeout 240 python3 -m drtriton.cli bench $C/dn --policy builtin --mode strict --budget 40 --workers 1 --device cuda --out $OUT/dn_bench > $OUT/dn_bench.log 2>&1
tail -3 $OUT/dn_bench.log | cut -c1-300
