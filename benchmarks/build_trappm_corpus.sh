#!/usr/bin/env bash
# The unlabeled graph corpus for TraPPM pre-training (issue #6): every timm model (98 families,
# 1,353 current names without test_ models) at 224 px × batch 1, 2, 4 … 128 and at 160 / 288 px ×
# batch 1; 6 models per family at 288 px × 12 batch sizes, 2 at 160 px × 7; training graphs of 2
# models per family. ≈ 20,700 graphs. A model's inference graphs at batch ≥ 2 come from one symbolic-batch trace
# (`perfcast.frontends.build_graphs`, identical to a trace per batch). Resumable: re-run to continue
# (graphs already in the index are skipped); passes are ordered so a partial corpus still covers
# every family. EXTRA=1 adds 288 px × 7 batches for every model and 5 training graphs per family.
#
#   nice -n 19 bash benchmarks/build_trappm_corpus.sh [CORPUS_DIR]   (default ~/.cache/perfcast/corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${PERFCAST_CORPUS:-$HOME/.cache/perfcast/corpus}}"
PC=".venv/bin/perfcast"
W="${WORKERS:-2}"
run() { echo "== $(date -u +%FT%TZ) pass: $*"; "$PC" corpus --out "$OUT" --workers "$W" "$@"; }
run --input-sizes 224 --batch-sizes 1
run --input-sizes 224 --batch-sizes 2,4,8,16,32,64,128
run --modes train --input-sizes 224 --batch-sizes 8 --variants-per-family 2 --timeout 60
run --input-sizes 160,288 --batch-sizes 1
run --input-sizes 288 --batch-sizes 2,3,4,6,8,12,16,24,32,48,64,128 --variants-per-family 6
run --input-sizes 160 --batch-sizes 2,4,8,16,32,64,128 --variants-per-family 2
if [ -n "${EXTRA:-}" ]; then  # more of the same kind (not needed for ≥ 20,000 graphs)
  run --input-sizes 288 --batch-sizes 2,4,8,16,32,64,128
  run --modes train --input-sizes 224 --batch-sizes 8 --variants-per-family 5
fi
echo "== $(date -u +%FT%TZ) done: $(($(wc -l < "$OUT/index.csv") - 1)) index rows in $OUT"
