# Session 35, call 1 (one H200): where DenseNet-121's time goes (the strict plan's kernels beside
# eager's and torch.compile's, full size); the MoE grouped product re-timed after 3de3e7f
# (transformers 5.24 carried as .device/c34/tf).
set -x
cd "$(dirname "$0")/../../../.."
export PYTHONPATH=$PWD/.device/c34/tf:$PWD
mkdir -p $OUT/dn $OUT/moe
sed 's/^SIZE = "small"/SIZE = "full"/' corpus/torchvision/densenet121.py > $OUT/dn/densenet121.py
timeout 300 python3 benchmarks/kernel_profile.py $OUT/dn/densenet121.py --mode strict --compile --calls 10 --out $OUT/dn > $OUT/dn.log 2>&1
rm -f $OUT/dn/densenet121.py
tail -c 3000 $OUT/dn.log
timeout 120 python3 benchmarks/plan_ab.py make --mode strict --out /tmp/moeB benchmarks/moe/mixtral_layers.py benchmarks/moe/olmoe_layers.py > $OUT/moe/make.log 2>&1
timeout 200 python3 benchmarks/plan_ab.py time --a /tmp/none --b /tmp/moeB --json $OUT/moe/ab.json --trials 30 benchmarks/moe/mixtral_layers.py benchmarks/moe/olmoe_layers.py > $OUT/moe/ab.log 2>&1
tail -20 $OUT/moe/ab.log | cut -c1-300
