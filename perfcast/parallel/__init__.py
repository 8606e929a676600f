"""Training over many GPUs: data, tensor and pipeline parallelism — the time of an
iteration, the memory per GPU, and the layouts ``perfcast plan`` ranks.

* :mod:`~perfcast.parallel.cluster` — :class:`Cluster`: GPUs per node and the links
  (``--cluster FILE.json``, or the device's registry defaults);
* :mod:`~perfcast.parallel.collectives` — an α–β model of NCCL's ring / tree collectives,
  fitted on Vidur's profiles;
* :mod:`~perfcast.parallel.blocks` — one traced block of an ``hf:`` transformer with
  Megatron's splits applied to its graph;
* :mod:`~perfcast.parallel.model` — the iteration: compute per node, tensor / pipeline / data
  parallel communication, pipeline bubble, ZeRO, recomputation, memory per GPU;
* :mod:`~perfcast.parallel.fit` — fitting the efficiencies on measured iterations;
* :mod:`~perfcast.parallel.predict` — :func:`predict_parallel` and
  :class:`ParallelPrediction` (``perfcast predict … --data-parallel D --tensor-parallel T
  --pipeline-parallel P``).
"""

from perfcast.parallel.cluster import Cluster
from perfcast.parallel.predict import ParallelPrediction, TransformerLayouts, predict_parallel

__all__ = ["Cluster", "ParallelPrediction", "TransformerLayouts", "predict_parallel"]
