#!/usr/bin/env bash
# TraPPM on our real labels (issue #6 item 4): `trappm` with the shipped corpus encoder, with a
# random frozen encoder (TraPPM's ablation), with the GraphMAE encoder and with the Huber loss, on
# the same splits as reports/eval/ (per-family Monte Carlo seeds 1337–1341 and 5 unseen-family
# folds; splits depend only on the records and seeds). Then benchmarks/trappm_report.py puts them
# beside the other predictors' reports/eval/ numbers → reports/trappm/comparison.md.
#
#   bash benchmarks/trappm_evaluate.sh [pretrained|random|graphmae|huber|baselines ...]  (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=.venv/bin/perfcast
R=reports/trappm
GRAPHMAE="${GRAPHMAE_ENCODER:-$HOME/.cache/perfcast/encoders/graphmae-c128}"
TASKS="a b c-i9 c-i7 e"
ev() { echo "== $(date -u +%FT%TZ) $*"; $P evaluate --predictors trappm "$@"; }
pretrained() {
  for t in $TASKS; do for s in unseen-family family-mc; do
    ev --task $t --split $s --out $R/eval; done; done
}
random() {
  for t in $TASKS; do for s in unseen-family family-mc; do
    ev --task $t --split $s --out $R/eval-random --param trappm.encoder=random; done; done
}
graphmae() {
  for t in a b e; do
    ev --task $t --split unseen-family --out $R/eval-graphmae --param trappm.encoder="$GRAPHMAE"; done
}
baselines() {  # histories for the convergence plot (reports/eval predates histories.csv)
  for t in a e; do
    $P evaluate --task $t --split family-mc --predictors nnlqp,dippm,mlp --out $R/eval-baselines; done
}
huber() {
  for t in a b e; do
    ev --task $t --split unseen-family --out $R/eval-huber --param trappm.loss=huber; done
}
for what in ${@:-pretrained random graphmae huber baselines}; do "$what"; done
