#!/usr/bin/env bash
# Pre-train TraPPM's encoders on the unlabeled corpus (issue #6 item 2): the GAE (TraPPM) and the
# GraphMAE variant (thesis ch. 7.4.3), c = 128, side by side (one torch thread each; 2 cores), then
# copy the GAE into the package (perfcast/predictors/shipped_encoders/corpus-gae-c128:
# encoder.json + encoder.safetensors — what `trappm`'s default encoder="shipped" loads).
# Resumable: re-run with a larger EPOCHS to continue both from their last epoch.
#
# The shipped encoder: EPOCHS=5 LIMIT=13129 — the corpus's first 13,129 graphs in index order (the
# passes built before pre-training started: 224 px × batch 1…128, 160/288 px × batch 1 for most
# models, 189 training graphs); 5 epochs took 14.7 min (GAE) / 16.4 min (GraphMAE) side by side.
#
#   EPOCHS=5 [LIMIT=N] bash benchmarks/trappm_pretrain.sh [CORPUS_DIR]   (default ~/.cache/perfcast/corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
CORPUS="${1:-${PERFCAST_CORPUS:-$HOME/.cache/perfcast/corpus}}"
ENC="${PERFCAST_ENCODERS:-$HOME/.cache/perfcast/encoders}"
EPOCHS="${EPOCHS:-5}"
LIMIT_ARGS=(); [ -n "${LIMIT:-}" ] && LIMIT_ARGS=(--limit "$LIMIT")
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p "$ENC"
for m in gae graphmae; do
  .venv/bin/perfcast pretrain --corpus "$CORPUS" --out "$ENC/$m-c128" --method $m --hidden 128 \
    --epochs "$EPOCHS" "${LIMIT_ARGS[@]}" --threads 1 --workers 1 --json > "$ENC/$m-c128.json" 2> "$ENC/$m-c128.log" &
done
wait
SHIP=perfcast/predictors/shipped_encoders/corpus-gae-c128
mkdir -p "$SHIP"
cp "$ENC/gae-c128/encoder.json" "$ENC/gae-c128/encoder.safetensors" "$SHIP/"
echo "shipped $(du -k "$SHIP/encoder.safetensors" | cut -f1) KB → $SHIP"
cat "$ENC/gae-c128.json" "$ENC/graphmae-c128.json"
