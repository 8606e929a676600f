#!/usr/bin/env bash
# Regenerates every report under reports/eval*/ (issue #4 item 4). Two queues run in parallel,
# one thread each (2 cores). Wall time on this machine: see BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# the checkout's data (see perfcast.paths) unless the environment names other folders
export PERFCAST_DATA="${PERFCAST_DATA:-$PWD/../shared/data}" PERFCAST_DATASETS="${PERFCAST_DATASETS:-$PWD/datasets}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=.venv/bin/perfcast
# memory tasks (e, e-nosim) read the simulation of every record: seed its cache from the
# validation run of the same simulator instead of re-simulating ~3,800 records
SEED="--memsim-seed reports/memory_validation.csv"
q1() {
  $P evaluate --task a --split unseen-family
  $P evaluate --task a --split family-mc
  $P evaluate --task d --split unseen-family
  $P evaluate --task d --split family-mc
  $P evaluate --task c-i9 --split unseen-family
  $P evaluate --task a --split random
}
q2() {
  $P evaluate --task b --split unseen-family
  $P evaluate --task e --split unseen-family $SEED
  $P evaluate --task e --split family-mc $SEED
  $P evaluate --task c-i7 --split unseen-family
  $P evaluate --task b --split family-mc
  # DIPPM Table 4 (GNN variants, 10 epochs) and the target-space ablation
  $P evaluate --task a --split random --seeds 1337 --out reports/eval-dippm-table4 \
     --predictors dippm,dippm-gcn,dippm-gat,dippm-gin,mlp \
     --param dippm.epochs=10 --param dippm-gcn.epochs=10 --param dippm-gat.epochs=10 \
     --param dippm-gin.epochs=10 --param mlp.epochs=10
  $P evaluate --task a --split unseen-family --out reports/eval-ablation-linear \
     --predictors dippm,xgboost --param dippm.target_space=linear --param xgboost.target_space=linear
  $P evaluate --task e --split unseen-family --out reports/eval-ablation-linear $SEED \
     --predictors xgboost --param xgboost.target_space=linear
  $P evaluate --task e-nosim --split unseen-family $SEED
  # per-sample time target (the shipped recipe's choice for time)
  for t in a b; do
    $P evaluate --task $t --split unseen-family --out reports/eval-ablation-per-sample \
       --predictors dippm,xgboost --param dippm.per_sample_time=true --param xgboost.per_sample_time=true
  done
}
q1 > reports/.eval-q1.log 2>&1 &
q2 > reports/.eval-q2.log 2>&1 &
wait
