#!/usr/bin/env bash
# The real-models corpus (corpus/) at its full sizes on the GPU, converted by the built-in policy
# in one mode, each folder a bench run with its own time limit, merged into one report.
#
#   OUT=results bash benchmarks/corpus_gpu.sh mixed 20 [folders...]
#   EXTRA=--cuda-graph ... also times each plan replayed as a CUDA graph (reported apart)
#   BATCH_ONE=1 ...        every problem at a batch of 1 (benchmarks/at_batch_one.py)
#
# Writes $OUT/corpus-<mode>.md, .json (summary) and .jsonl (verdicts).
set -u
MODE=${1:-mixed}
BUDGET=${2:-20}
shift 2 || true
FOLDERS=${*:-torch transformers torchvision}
OUT=${OUT:-bench-corpus}
WORK=$(mktemp -d)
export PYTHONUNBUFFERED=1
# the corpus at its full sizes: a copy with each file's size switch set
cp -r corpus "$WORK/corpus"
sed -i 's/^SIZE = "small"/SIZE = "full"/' "$WORK"/corpus/*/*.py
[ "${BATCH_ONE:-}" = 1 ] && python3 benchmarks/at_batch_one.py "$WORK"/corpus/*/
runs=()
for folder in $FOLDERS; do
    started=$(date +%s)
    timeout "${FOLDER_LIMIT:-240}" python3 -m drtriton.cli bench "$WORK/corpus/$folder" --policy builtin --mode "$MODE" \
        --budget "$BUDGET" --workers "${WORKERS:-4}" --device cuda --out "$WORK/$folder" ${EXTRA:-} 2>&1 | grep -v "^\.\.\." | tail -n 60
    finished=$(cat "$WORK/$folder/verdicts.jsonl" 2>/dev/null | wc -l)
    echo "== corpus/$folder ($MODE): $finished of $(ls corpus/$folder/*.py | wc -l) problems finished in $(( $(date +%s) - started )) s"
    [ -s "$WORK/$folder/verdicts.jsonl" ] && runs+=("$WORK/$folder")
done
python3 benchmarks/merge_bench.py --out "$WORK/merged" --title "corpus, $MODE mode, full sizes${BATCH_ONE:+, batch 1} ($FOLDERS)" "${runs[@]}"
mkdir -p "$OUT"
cp "$WORK/merged/report.md" "$OUT/corpus-$MODE.md"
cp "$WORK/merged/summary.json" "$OUT/corpus-$MODE.json"
cp "$WORK/merged/verdicts.jsonl" "$OUT/corpus-$MODE.jsonl"
head -n 12 "$OUT/corpus-$MODE.md"
