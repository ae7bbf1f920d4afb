# Session 37, call 4 (one H200): corpus/torch at full sizes through drtriton bench, strict, this
# tree (7e1fe6c: values kept per shape, copies elided, tiles; the verifier judging the first call
# per shape and comparing later calls with a second).
set -x
cd "$(dirname "$0")/../../../.."
OUT=$OUT/corpus FOLDER_LIMIT=420 WORKERS=6 bash benchmarks/corpus_gpu.sh strict 15 torch 2>&1 | tail -45
