"""Public measurements as labeled datasets, joined to perfcast graphs.

Loaders read the shared measurement files (``data_dir=``, else ``$PERFCAST_DATA``, else
``<data home>/public``: see :mod:`perfcast.paths`) in place — never copy them — and return one
pandas DataFrame schema. Each frame carries ``df.attrs["report"]``, a :class:`LoadReport` (rows
in, examples out, drop reasons; ``.parts`` per file, ``.to_markdown()``).

    load_timm_benchmarks(which="all")   timm-benchmarks/benchmark-*.csv (6 files)
    load_gpumemnet()                    gpumemnet-timm-train-memory-a100.csv
    load_torchvision_benchmark()        pytorch-gpu-benchmark-torchvision.csv
    load_neusight()                     neusight/labels.csv (transformers, whole-model latency)
    load_neusight_peers()               neusight/peer_predictions.csv joined to the labels
    load_dlperf_single_gpu()            dlperf/dp_scaling.csv: one V100's PyTorch training
                                        step (ResNet-50 v1.5, BERT-Base; DLPerf)
    load_all()                          all of the above but the peers, concatenated (NeuSight
                                        and DLPerf when their files are present)

Schema (units as in :mod:`perfcast.store.db`):

=====================  ===================================================================
``model``              perfcast spec: ``timm:<name>[.<tag>]`` / ``torchvision:<name>``
``family``             architecture family for leave-family-out splits: timm's module name
                       (``resnet``, ``efficientnet``, ``vision_transformer`` ...) or the
                       torchvision builder's module (``resnet``, ``mobilenetv2`` ...)
``device``             perfcast device key (:func:`perfcast.devices.get_device`)
``mode``               ``infer`` | ``train`` (fwd + bwd + optimizer step)
``precision``          ``fp32`` | ``amp`` (float16 autocast, timm ``--amp``) | ``fp16`` (whole
                       model in half) | ``bf16`` | ``fp64``
``batch_size``         int, batch actually run on one device (per GPU for data parallel)
``input_size``         per-sample shape as text, ``"3,224,224"``
``seq_len``            nullable int (NA for vision models)
``time_ms``            float, ms per batch: latency (infer) or step time (train); a median
                       where the source gives one; NaN when not measured
``memory_mb``          float, peak memory in **MiB** (2**20 bytes — "MB" in perfcast always
                       means MiB; GPUMemNet's MiB values are stored unchanged); NaN if absent
``energy_j``           float, J per batch (NaN in these sources)
``power_w``            float, W average (NaN in these sources)
``censored``           bool: the true memory is >= ``censor_at_mb`` (OOM/saturated run)
``num_gpus``           int, devices used (data parallel); 1 unless the source says otherwise
``source``             source file name
``source_row``         0-based data-row index in that file (file line = source_row + 2)
``raw_model``          model name as written in the file
=====================  ===================================================================

Appended columns: ``arch`` (architecture without pretrained tag), ``renamed`` (pre-1.0 timm name
mapped through timm's deprecated-name table), ``software`` (``torch-2.4/cu124`` ... or None),
``compiled`` (torch.compile), ``optimizer`` (train rows; None = undocumented),
``global_batch_size`` (batch x num_gpus), ``time_ms_mean`` / ``time_ms_p10`` / ``time_ms_p90``,
``memory_kind`` (``nvml_used`` = nvidia-smi process peak incl. CUDA context and allocator
reserve), ``censor_reason``, ``censor_at_mb`` (lower bound for censored rows, MiB),
``suspect`` (kept but inconsistent with neighbouring rows), ``faketensor_estimate_mb``
(GPUMemNet's own estimate: a peer, not a label), ``ref_params_m`` / ``ref_gmacs`` /
``ref_macts_m`` (timm's own counts), ``assumed`` (fields not documented by the source, filled by
assumption; see each loader), ``upstream_source``.

Joining: :func:`record_workload` gives the :class:`~perfcast.workload.Workload` of a record;
:func:`attach_graph_keys` adds ``graph_key`` (:meth:`~perfcast.workload.Workload.key`) without
building graphs.
"""

from __future__ import annotations

import os

import pandas as pd

from perfcast.datasets._base import (
    COLUMNS,
    ENV_VAR,
    EXTRA_COLUMNS,
    LoadReport,
    default_data_dir,
    finalize,
    resolve_data_dir,
    with_report,
)
from perfcast.datasets.dlperf import DP_SCALING_FILE, load_dlperf_single_gpu
from perfcast.datasets.gpumemnet import load_gpumemnet
from perfcast.datasets.join import attach_graph_keys, record_workload
from perfcast.datasets.local import (family_of, load_labeled, load_local_cpu, load_measurements,
                                     local_cpu_db)
from perfcast.datasets.neusight import LABELS as NEUSIGHT_LABELS
from perfcast.datasets.neusight import load_neusight, load_neusight_peers
from perfcast.datasets.timm_bench import load_timm_benchmarks, timm_files
from perfcast.datasets.torchvision_bench import load_torchvision_benchmark

__all__ = [
    "COLUMNS", "EXTRA_COLUMNS", "ENV_VAR", "LoadReport", "default_data_dir", "resolve_data_dir",
    "load_timm_benchmarks", "load_gpumemnet", "load_torchvision_benchmark", "load_all",
    "timm_files", "record_workload", "attach_graph_keys", "load_local_cpu", "load_measurements",
    "load_labeled", "family_of",
    "local_cpu_db", "load_neusight", "load_neusight_peers", "load_dlperf_single_gpu",
]


def load_all(data_dir: str | os.PathLike | None = None) -> pd.DataFrame:
    """Every supported file, concatenated; ``df.attrs["report"].files()`` are the per-file reports.
    NeuSight's labels are included when ``neusight/labels.csv`` is present, DLPerf's single-GPU
    records when ``dlperf/dp_scaling.csv`` is (tasks select records by ``source``, so the others
    are unchanged by them)."""
    frames = [load_timm_benchmarks("all", data_dir=data_dir), load_gpumemnet(data_dir=data_dir),
              load_torchvision_benchmark(data_dir=data_dir)]
    if (resolve_data_dir(data_dir) / NEUSIGHT_LABELS).is_file():
        frames.append(load_neusight(data_dir=data_dir))
    if (resolve_data_dir(data_dir) / DP_SCALING_FILE).is_file():
        frames.append(load_dlperf_single_gpu(data_dir=data_dir))
    parts = [f.attrs["report"] for f in frames]
    for f in frames:
        f.attrs = {}
    df = finalize(pd.concat(frames, ignore_index=True))
    return with_report(df, LoadReport.combine("all", parts, df))
