"""The time of a collective: an α–β model of NCCL's ring and tree algorithms, fitted on Vidur's
all-reduce and send/recv profiles (``vidur/network``, A100 DGX inside and across nodes).

For a group of ``n`` GPUs, ``k`` of them in each of ``N = n / k`` nodes, on a
:class:`~perfcast.parallel.cluster.Cluster` (per-GPU unidirectional bandwidths ``b_in`` inside a
node, ``b_net`` across nodes)::

    bandwidth   B = η_in·b_in                        (one node)
                B = min(η_in·b_in, η_net·k·b_net)    (several: the k GPUs of a node each drive
                                                      their share of the network, as NCCL's
                                                      rings run one channel per NIC)
    latency     α = α_in (one node) or α_net (several), per step
    ring all-reduce        t = t0 + 2(n−1)·α + 2·(n−1)/n · S/B
    tree all-reduce        t = t0 + 2·(⌈log2 N⌉·α_net + (k−1)·α_in) + 2·S/B    (N > 1)
    all-reduce             min(ring, tree)   (NCCL picks the faster)
    all-gather / reduce-scatter (ring)   t0 + (n−1)·α + (n−1)/n · S/B   (S: the whole tensor)
    send / recv            t0 + α + S / (η_p2p·b)   (b: the link between the two GPUs; a copy
                                                   reaches more of it than a reduction)

``S`` is the message in bytes, ``t0`` a fixed launch cost. The seven parameters (``t0``,
``α_in``, ``α_net``, ``η_in``, ``η_net`` of the reductions and gathers, ``η_p2p_in``,
``η_p2p_net`` of point-to-point copies) are fitted by least squares on the log time of
every profiled point (:func:`fit`); the shipped ones (``collectives.json``) were fitted on
all of Vidur's A100 DGX profiles (``benchmarks/distributed_eval.py``, which also reports the
leave-one-configuration-out error). A cluster file may give its own latencies.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from perfcast.errors import PerfcastError, unknown_choice
from perfcast.parallel.cluster import Cluster

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
#: The parameters, in the order :func:`fit` optimises them.
PARAMS = ("t0_us", "alpha_intra_us", "alpha_inter_us", "eta_intra", "eta_inter",
          "eta_p2p_intra", "eta_p2p_inter")


@dataclass(frozen=True)
class CollectiveModel:
    """The fitted parameters (µs and fractions of the nominal bandwidth) and their provenance."""

    t0_us: float = 10.0
    alpha_intra_us: float = 2.0
    alpha_inter_us: float = 8.0
    eta_intra: float = 0.7
    eta_inter: float = 0.7
    eta_p2p_intra: float = 0.8
    eta_p2p_inter: float = 0.8
    trained_on: dict[str, Any] = field(default_factory=dict, compare=False)

    # ----------------------------------------------------------------------------- pieces
    def _alpha(self, cluster: Cluster, nodes: int) -> tuple[float, float]:
        """(α inside a node, α across nodes) in ms, the cluster's own when it gives them."""
        a_in = cluster.intra_node_latency_us if cluster.intra_node_latency_us is not None \
            else self.alpha_intra_us
        a_net = cluster.inter_node_latency_us if cluster.inter_node_latency_us is not None \
            else self.alpha_inter_us
        return a_in / 1e3, a_net / 1e3

    def bandwidth_gbs(self, cluster: Cluster, n: int, per_node: int) -> float:
        """Achieved bus bandwidth (GB/s) of a group of ``n`` GPUs with ``per_node`` in each
        node."""
        k = max(1, min(per_node, n))
        b_in = self.eta_intra * cluster.intra_node_gbs
        if n <= k:
            return b_in
        return min(b_in, self.eta_inter * k * cluster.inter_node_gbs)

    def time_ms(self, kind: str, nbytes: float, n: int, per_node: int,
                cluster: Cluster) -> float:
        """Milliseconds of one ``kind`` collective of ``nbytes`` over ``n`` GPUs, ``per_node``
        of them in each node (``send_recv``: ``n`` = 2, ``per_node`` 2 inside a node, 1
        across). 0 for a group of one GPU or an empty message."""
        if kind not in KINDS:
            raise unknown_choice("collective", kind, KINDS)
        a_in, a_net = self._alpha(cluster, 0)
        return float(self.times_ms(np.array([KINDS.index(kind)]), np.array([float(nbytes)]),
                                   np.array([int(n)]), np.array([int(per_node)]),
                                   cluster.intra_node_gbs, cluster.inter_node_gbs,
                                   a_in, a_net)[0])

    def times_ms(self, kind, nbytes, n, per_node, intra_gbs, inter_gbs, a_in, a_net
                 ) -> np.ndarray:
        """:meth:`time_ms` over arrays (``kind``: indices into :data:`KINDS`; bandwidths in
        GB/s and latencies in ms, scalars or arrays)."""
        kind, n = np.asarray(kind), np.asarray(n, dtype=float)
        k = np.clip(np.asarray(per_node, dtype=float), 1.0, np.maximum(n, 1.0))
        nodes = np.ceil(n / k)
        multi = nodes > 1
        S = np.asarray(nbytes, dtype=float) / 1e9 * 1e3  # GB · 1e3: ms at GB/s
        t0 = self.t0_us / 1e3
        b_in = self.eta_intra * np.asarray(intra_gbs, dtype=float)
        b_net1 = self.eta_inter * np.asarray(inter_gbs, dtype=float)
        B = np.where(multi, np.minimum(b_in, b_net1 * k), b_in)
        a = np.where(multi, a_net, a_in)
        nn = np.maximum(n, 1.0)
        ring_ar = t0 + 2 * (n - 1) * a + 2 * (n - 1) / nn * S / B
        tree_ar = t0 + 2 * (np.ceil(np.log2(np.maximum(nodes, 1.0))) * a_net + (k - 1) * a_in) \
            + 2 * S / B
        ar = np.where(multi, np.minimum(ring_ar, tree_ar), ring_ar)
        ag = t0 + (n - 1) * a + (n - 1) / nn * S / B
        p2p = t0 + a + S / np.where(multi, self.eta_p2p_inter * np.asarray(inter_gbs, float),
                                    self.eta_p2p_intra * np.asarray(intra_gbs, float))
        out = np.select([kind == 0, kind == 3], [ar, p2p], ag)
        return np.where((n <= 1) | (S <= 0), 0.0, out)

    def all_to_all_ms(self, nbytes: float, n: int, per_node: int, cluster: Cluster) -> float:
        """Milliseconds of one all-to-all over ``n`` GPUs, ``per_node`` of them in each node, in
        which every GPU holds ``nbytes`` and keeps 1/n of them (an MoE's token dispatch or
        combine under uniform routing): (k − 1)/n of them go to the GPUs of its node, (n − k)/n
        over its share of the network, both at once::

            t = t0 + (n − 1)·α + max((k−1)/n · S / (η_in·b_in), (n−k)/n · S / (η_net·b_net))

        with the efficiencies fitted for the gathers (Vidur's profiles hold no all-to-all)."""
        n = int(n)
        if n <= 1 or nbytes <= 0:
            return 0.0
        k = max(1, min(int(per_node), n))
        a_in, a_net = self._alpha(cluster, 0)
        a = a_net if n > k else a_in
        S = float(nbytes) / 1e9 * 1e3
        t_in = (k - 1) / n * S / (self.eta_intra * cluster.intra_node_gbs)
        t_net = (n - k) / n * S / (self.eta_inter * cluster.inter_node_gbs)
        return self.t0_us / 1e3 + (n - 1) * a + max(t_in, t_net)

    # ----------------------------------------------------------------------------- files
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> CollectiveModel:
        try:
            return cls(**{k: doc[k] for k in (*PARAMS, "trained_on") if k in doc})
        except TypeError as exc:
            raise PerfcastError(f"collective model: {exc}") from None


@lru_cache(maxsize=1)
def shipped() -> CollectiveModel:
    """The collective model shipped with perfcast (``parallel/collectives.json``)."""
    from perfcast.paths import package_data

    path = package_data("parallel", "collectives.json")
    if not path.is_file():
        return CollectiveModel(trained_on={"note": "defaults: the fit was never run"})
    return CollectiveModel.from_dict(json.loads(path.read_text()))


def predict_rows(model: CollectiveModel, rows, clusters: dict[str, Cluster]) -> np.ndarray:
    """Predicted ms for the rows of :func:`perfcast.datasets.dlperf.load_vidur_network`
    (``topology``, ``collective``, ``gpus``, ``gpus_per_node``, ``bytes``); ``clusters`` maps
    each ``topology`` — or ``(topology, gpus)`` where the group's bottleneck link differs —
    to its :class:`Cluster`."""
    cs = [clusters.get((t, int(g))) or clusters[t]
          for t, g in zip(rows["topology"], rows["gpus"])]
    a = [model._alpha(c, 0) for c in cs]
    return model.times_ms(rows["collective"].map(KINDS.index).to_numpy(),
                          rows["bytes"].to_numpy(float), rows["gpus"].to_numpy(int),
                          rows["gpus_per_node"].to_numpy(int),
                          np.array([c.intra_node_gbs for c in cs]),
                          np.array([c.inter_node_gbs for c in cs]),
                          np.array([x[0] for x in a]), np.array([x[1] for x in a]))


def fit(rows, clusters: dict[str, Cluster], *, start: CollectiveModel | None = None,
        trained_on: dict[str, Any] | None = None) -> CollectiveModel:
    """The :class:`CollectiveModel` minimising the squared log error over ``rows`` (see
    :func:`predict_rows`); every parameter kept positive (log-parametrised), the efficiencies
    ≤ 1."""
    from scipy.optimize import least_squares

    base = start or CollectiveModel()
    y = np.log(rows["time_ms"].to_numpy(float))

    def model_of(x) -> CollectiveModel:
        v = np.exp(x)
        return replace(base, t0_us=v[0], alpha_intra_us=v[1], alpha_inter_us=v[2],
                       eta_intra=min(v[3], 1.0), eta_inter=min(v[4], 1.0),
                       eta_p2p_intra=min(v[5], 1.0), eta_p2p_inter=min(v[6], 1.0))

    def resid(x):
        return np.log(predict_rows(model_of(x), rows, clusters)) - y

    x0 = np.log([getattr(base, p) for p in PARAMS])
    hi = np.log([1e4, 1e3, 1e4, 1.0, 1.0, 1.0, 1.0])
    lo = np.log([1e-2, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3])
    res = least_squares(resid, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi))
    m = model_of(res.x)
    return replace(m, trained_on=dict(trained_on or {}, points=int(len(rows))))


__all__ = ["CollectiveModel", "KINDS", "PARAMS", "fit", "predict_rows", "shipped"]
