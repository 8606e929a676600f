"""How sure a prediction is: calibrated intervals (split conformal in log space, Mondrian by OOD-score bucket: :mod:`~perfcast.uncertainty.conformal`), an out-of-distribution score (:mod:`~perfcast.uncertainty.ood`) and the annotation of a prediction with both (:mod:`~perfcast.uncertainty.attach`). The method and its held-out figures: the docs' intervals page and ``reports/uncertainty/``."""

from __future__ import annotations

from perfcast.uncertainty.ood import (  # noqa: F401
    DEFAULT_COVERAGE,
    FORMAT,
    INTERVAL_KEYS,
    LARGE_APE,
    MIN_BUCKET,
    MIN_FLAGGED,
    N_BUCKETS,
    OODReference,
    OP_WEIGHT,
    PCA_DIMS,
    _ape,
    _loo_scale,
    _n_ops,
    _octaves_outside,
    auroc,
    descriptor,
    device_vector,
    flag_threshold,
    input_per_sample,
    op_counts_of_data,
    op_counts_of_graph,
    youden_threshold,
)
from perfcast.uncertainty.conformal import (  # noqa: F401
    Calibration,
    _load_file,
    calibration_path,
    calibrations,
    conformal_bounds,
    find_calibration,
    interval,
    write_calibrations,
)
from perfcast.uncertainty.attach import (  # noqa: F401
    SIMULATION_GPU,
    _ceiling,
    _floor,
    annotate,
    pick,
    request_features,
)
from perfcast.shipped import CALIBRATION_FILE  # noqa: F401
from perfcast.workload import RISKS  # noqa: F401  (the decisions' risk attitudes)

__all__ = [
    "CALIBRATION_FILE",
    "DEFAULT_COVERAGE",
    "INTERVAL_KEYS",
    "RISKS",
    "Calibration",
    "OODReference",
    "annotate",
    "auroc",
    "calibrations",
    "conformal_bounds",
    "descriptor",
    "device_vector",
    "find_calibration",
    "flag_threshold",
    "interval",
    "pick",
    "write_calibrations",
    "youden_threshold",
]
