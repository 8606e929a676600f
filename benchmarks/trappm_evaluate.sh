#!/usr/bin/env bash
# TraPPM on our real labels (issue #6 item 4): `trappm` with the shipped corpus encoder, with a
# random frozen encoder (TraPPM's ablation), with the GraphMAE encoder and with the Huber loss, on
# the same splits as reports/eval/ (per-family Monte Carlo seeds 1337–1341 and 5 unseen-family
# folds; splits depend only on the records and seeds). Then benchmarks/trappm_report.py puts them
# beside the other predictors' reports/eval/ numbers → reports/trappm/comparison.md.
#
#   bash benchmarks/trappm_evaluate.sh [pretrained|random|graphmae|huber|linearout|baselines ...]  (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
# the checkout's data (see perfcast.paths) unless the environment names other folders
export PERFCAST_DATA="${PERFCAST_DATA:-$PWD/../shared/data}" PERFCAST_DATASETS="${PERFCAST_DATASETS:-$PWD/datasets}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=.venv/bin/perfcast
R=reports/trappm
GRAPHMAE="${GRAPHMAE_ENCODER:-$HOME/.cache/perfcast/encoders/graphmae-c128}"
TASKS="a b c-i9 c-i7 e"
# ev TASK SPLIT OUT [more evaluate options]; a report already there is kept unless FORCE=1
ev() {
  local t=$1 s=$2 o=$3; shift 3
  if [ -z "${FORCE:-}" ] && [ -f "$o/$t/$s/summary.md" ]; then echo "== have $o/$t/$s"; return; fi
  echo "== $(date -u +%FT%TZ) $t $s $o $*"
  # memory tasks read the simulation of every record: the validation run seeds its cache
  $P evaluate --predictors trappm --task "$t" --split "$s" --out "$o" \
     --memsim-seed reports/memory_validation.csv "$@"
}
pretrained() {  # family-mc where reports/eval has it (a, b, e)
  for t in $TASKS; do ev $t unseen-family $R/eval; done
  for t in a b e; do ev $t family-mc $R/eval; done
}
random() {  # every task on unseen families, and task a on TraPPM's own protocol (family-mc)
  for t in $TASKS; do
    ev $t unseen-family $R/eval-random --param trappm.encoder=random; done
  ev a family-mc $R/eval-random --param trappm.encoder=random
}
graphmae() {
  for t in a b e; do
    ev $t unseen-family $R/eval-graphmae --param trappm.encoder="$GRAPHMAE"; done
}
linearout() {  # the GAE with a linear last layer (TraPPM's ReLU + dropout there stays at chance)
  local enc="$HOME/.cache/perfcast/encoders/gae-c128-nofinal"
  $P pretrain --corpus "${PERFCAST_CORPUS:-$HOME/.cache/perfcast/corpus}" --out "$enc" --method gae \
     --hidden 128 --linear-out --dropout 0 --epochs 3 --limit 4000 --threads 1 --workers 1 --json
  ev a unseen-family $R/eval-gae-linear-out --param trappm.encoder="$enc"
}
baselines() {  # histories for the convergence plot (reports/eval predates histories.csv)
  $P evaluate --task a --split family-mc --predictors nnlqp,dippm,mlp --out $R/eval-baselines
}
huber() {
  for t in a e; do
    ev $t unseen-family $R/eval-huber --param trappm.loss=huber; done
}
for what in ${@:-pretrained random graphmae huber linearout baselines}; do "$what"; done
