# Session 37, call 1 (one H200): where Swin-T's and DenseNet-121's calls go on the host (strict
# first plans, full size); a tiled transposed add against the flat one.
set -x
cd "$(dirname "$0")/../../../.."
mkdir -p .device/c37/full
for f in swin_t densenet121; do sed 's/^SIZE = "small"/SIZE = "full"/' corpus/torchvision/$f.py > .device/c37/full/$f.py; done
sed 's/^SIZE = "small"/SIZE = "full"/' corpus/torch/embedding_bag.py > .device/c37/full/embedding_bag.py
timeout 120 python3 docs/results/session37-gpu/scripts/tile_bench.py > $OUT/tile.log 2>&1
timeout 400 python3 docs/results/session37-gpu/scripts/host_profile.py .device/c37/full/swin_t.py .device/c37/full/embedding_bag.py .device/c37/full/densenet121.py > $OUT/host.log 2>&1
cat $OUT/tile.log; grep -v "^$" $OUT/host.log | cut -c1-300 | head -150
