#!/usr/bin/env bash
# DNNPerf (issue #19 part 1): the evaluations behind reports/dnnperf/README.md, then the report.
# One thread per run; `all` runs two queues side by side on the 2 cores. Wall time per fit: the
# reports' fits.csv (task a ≈ 4–8 min, task e ≈ 10–20 min on one core).
#   bash benchmarks/dnnperf_evaluate.sh [main-a|main-e|ablation-a|ablation-e|report|all]
set -euo pipefail
cd "$(dirname "$0")/.."
export PERFCAST_DATA="${PERFCAST_DATA:-$PWD/../shared/data}" PERFCAST_DATASETS="${PERFCAST_DATASETS:-$PWD/datasets}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=".venv/bin/perfcast evaluate --predictors dnnperf --seeds 1337 --workers 1"
SEED="--memsim-seed reports/memory_validation.csv"
main_a() {
  $P --task a --split family-mc --out reports/dnnperf/eval
  $P --task a --split unseen-family --out reports/dnnperf/eval
}
main_e() {
  $P --task e --split family-mc --out reports/dnnperf/eval $SEED
  $P --task e --split unseen-family --out reports/dnnperf/eval $SEED
}
# DNNPerf Table VIII's form: the same split with one part of the method changed (task e: the two
# the issue names, each e fit costs ≈ 15–25 min on one core)
ablation() {  # $1 = task, $2.. = extra evaluate options
  local t=$1; shift
  $P --task "$t" --split family-mc --out reports/dnnperf/eval-no-attention --param dnnperf.attention=false "$@"
  $P --task "$t" --split family-mc --out reports/dnnperf/eval-no-edge-features --param dnnperf.edge_features=false "$@"
  [ "$t" = e ] && return
  $P --task "$t" --split family-mc --out reports/dnnperf/eval-avg-readout --param dnnperf.readout=mean "$@"
  $P --task "$t" --split family-mc --out reports/dnnperf/eval-tf-setting --param dnnperf.rounds=tf \
     --param dnnperf.readout_norm=scale --param dnnperf.lr=0.002 "$@"
}
case "${1:-all}" in
  main-a) main_a ;;
  main-e) main_e ;;
  ablation-a) ablation a ;;
  ablation-e) ablation e $SEED ;;
  report) ;;
  all) { main_a; ablation a; } & { main_e; ablation e $SEED; } & wait ;;
  *) echo "usage: $0 [main-a|main-e|ablation-a|ablation-e|report|all]" >&2; exit 2 ;;
esac
.venv/bin/python benchmarks/dnnperf_report.py
