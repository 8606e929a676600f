#!/usr/bin/env bash
# DNNPerf (issue #19 part 1): the evaluations behind reports/dnnperf/README.md, then the report.
# One thread per run; the two queues run side by side on the 2 cores. Wall time on this machine:
# see reports/dnnperf/README.md. Usage: bash benchmarks/dnnperf_evaluate.sh [main|ablation|report]
set -euo pipefail
cd "$(dirname "$0")/.."
export PERFCAST_DATA="${PERFCAST_DATA:-$PWD/../shared/data}" PERFCAST_DATASETS="${PERFCAST_DATASETS:-$PWD/datasets}"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
P=".venv/bin/perfcast evaluate --predictors dnnperf --seeds 1337 --workers 1"
SEED="--memsim-seed reports/memory_validation.csv"
main() {
  $P --task a --split unseen-family --out reports/dnnperf/eval
  $P --task a --split family-mc --out reports/dnnperf/eval
  $P --task e --split family-mc --out reports/dnnperf/eval $SEED
  $P --task e --split unseen-family --out reports/dnnperf/eval $SEED
}
ablation() {
  $P --task a --split family-mc --out reports/dnnperf/eval-no-attention --param dnnperf.attention=false
  $P --task a --split family-mc --out reports/dnnperf/eval-no-edge-features --param dnnperf.edge_features=false
  $P --task a --split family-mc --out reports/dnnperf/eval-avg-readout --param dnnperf.readout=mean
}
case "${1:-all}" in
  main) main ;;
  ablation) ablation ;;
  report) ;;
  all) main & ablation & wait ;;
  *) echo "usage: $0 [main|ablation|report|all]" >&2; exit 2 ;;
esac
.venv/bin/python benchmarks/dnnperf_report.py
