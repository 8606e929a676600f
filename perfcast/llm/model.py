"""LLM generation time and power: the ``llm-xgboost`` estimator — the thesis' XGBoost (ch. 6,
Table 6.3 features, hardware from the device registry, plus engine, tensor parallelism, input
and output lengths) and perfcast's physics-bounded formulation of it.

Formulations (``target_mode``):

* ``"engine"`` (perfcast's, the default): a prediction is the request's arithmetic lower bound
  times a learned factor ``≥ 1``, built in two stages. (1) An **engine model** per serving
  engine × vendor, five numbers fitted on the training rows (least squares in log space)::

      time = Σ_passes count · ( max(a · FLOPs / (n·peak), b · bytes / (n·BW))
                                + t0 + t1 · layers + κ · all-reduce(n) )

  with ``a, b ≥ 1`` (the compute and bandwidth efficiency the engine reaches, inverted), ``t0,
  t1 ≥ 0`` (its per-pass and per-layer overheads: kernel launches, scheduling, sampling) and
  ``κ ≥ 0`` scaling vidur's NVLink all-reduce profile (two per layer under tensor parallelism)
  — the passes, FLOPs and bytes from :mod:`perfcast.llm.physics`. Because the device enters
  only through its spec sheet (peak, bandwidth), a GPU that was never measured is answered by
  the same five numbers of its vendor's engine: a faster memory shrinks the bandwidth term and
  leaves the overheads, which is what makes newer GPUs' factors larger. (2) An XGBoost booster
  on ``log(measured / engine model)`` from the model, request and physics-share features (no
  hardware identity), its correction clipped to ``exp(±residual_clip)``. The answer is
  ``max(bound, engine model × exp(residual))``.
* ``"residual"``: the booster alone fits ``log(measured / bound)`` (first slice's formulation).
* ``"direct"`` (the thesis'): the booster fits ``log(measured)`` from the same features.
* ``"blend"`` (the shipped latency model): the geometric mean of ``engine`` (booster without
  hardware features) and ``residual`` (booster with the ``hardware`` features): both are ≥ the
  bound, so is their mean. The two err differently on a GPU neither has seen — the engine model
  extrapolates the overheads by physics, the residual booster carries the measured GPUs' factor
  (their held-out errors: ``reports/llm/``).

Targets: ``latency_s`` (LLM-Inference-Bench: a static batch's end-to-end time), ``tpot_s``
(ML.ENERGY: time per output token of a request under continuous batching; the engine model
sees one decode step), ``token_time_s`` (ML.ENERGY: seconds per output token of the whole
server, ``1 / Token tput`` — one decode step ÷ running batch) and ``power_per_device_w``
(ML.ENERGY: average board power while serving, learned as a fraction of TDP and bounded to
``[idle, TDP]`` — energy is power × time in one code path, :mod:`perfcast.llm.energy`).

The estimator follows the scikit-learn contract of :mod:`perfcast.predictors.base`; it lives in
the ``llm`` room so that a generation prediction imports neither torch, transformers nor pandas
(its inputs: a ``pandas.DataFrame`` to train, a :class:`~perfcast.features.table.Table` to
answer).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.table import Table, isna, notna

if TYPE_CHECKING:  # pandas: imported to train and evaluate, never to answer
    import pandas as pd

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
FORMAT = "perfcast-llm/2"
TARGETS = ("latency_s", "tpot_s", "token_time_s", "power_per_device_w")
MODES = ("blend", "engine", "residual", "direct")
#: Engines as one-hot features (the order is part of the saved format).
ENGINES = ("vllm", "trt-llm", "llama.cpp", "deepspeed-mii", "hf")
VENDORS = ("nvidia", "amd", "intel")

#: Thesis Table 6.3 features (batch, sequence length, quantization, model size and shape) as
#: we have them (TM, the MACs, is the request's FLOPs among the physics features; graph nodes
#: and edges in :data:`GRAPH_FEATURES`), then the serving request's own.
MODEL_FEATURES = ("params_b", "active_params_b", "layers", "hidden", "heads", "kv_heads",
                  "head_dim", "intermediate", "vocab", "max_positions", "moe",
                  "kv_kib_per_token", "weight_bytes_per_param")
#: Table 6.3's graph features (TN, TE: nodes and edges of the model's traced prefill graph,
#: ``perfcast.llm.graphs``; missing for a model never traced). The thesis' formulation
#: (``direct``) reads them; the physics-bounded ones have the FLOPs and bytes instead.
GRAPH_FEATURES = ("graph_nodes", "graph_edges")
REQUEST_FEATURES = ("batch_size", "concurrent", "input_len", "output_len", "n_devices",
                    *(f"engine_{e}" for e in ENGINES))
#: Hardware features by ``hardware`` setting: ``specs`` — the registry's numbers, as the thesis
#: feeds them (Table 6.3); ``vendor`` — the vendor and the ridge point FLOP/byte only; ``none``
#: — the Table 6.6 ablation. The engine formulation's booster uses ``none`` by default: the
#: device is already in the engine model through its peak and bandwidth.
HARDWARE_FEATURES = {
    "specs": ("peak16_tflops", "bandwidth_tbs", "memory_gb", "tdp_w", "arch_year", "l2_mb"),
    "vendor": ("vendor_nvidia", "vendor_amd", "vendor_intel", "flop_per_byte"),
    "none": (),
}
#: The bound's parts (every formulation reads them).
PHYSICS_FEATURES = ("log_bound_s", "log_prefill_s", "log_decode_s", "log_first_step_s",
                    "waves", "compute_bound_fraction", "log_tflop", "log_passes",
                    "log_comm_over_bound")
#: The engine model's shares of its own prediction (engine formulation only).
ENGINE_FEATURES = ("log_engine_over_bound", "share_compute", "share_memory",
                   "share_overhead", "share_comm")
#: Engine-model parameters: names, lower bounds, starting values (a, b dimensionless; t0, t1
#: seconds; κ dimensionless).
ENGINE_PARAMS = ("a", "b", "t0", "t1", "kappa")
#: Floors of the engine parameters: what the kernels alone reach in vidur's A100 profile
#: (``../shared/data/vidur/compute/mlp-a100.csv``, the 7 LLMs' layers at TP 1–8; measured with
#: ``benchmarks/llm_vidur_kernels.py``, numbers in ``reports/llm/``): the QKV / output / MLP
#: GEMMs take 1.33× the FLOPs at peak for ≥ 2,048 tokens (a) and 1.04× the weight bytes at
#: peak bandwidth for 1–32 tokens (b); the layer's other kernels (2 norms, rotary, activation,
#: residual add) take ≥ 20 µs per layer and pass (t1). No engine beats its kernels.
ENGINE_FLOORS = {"a": 1.33, "b": 1.04, "t0": 0.0, "t1": 20e-6, "kappa": 0.0}
_LOWER = np.array([ENGINE_FLOORS[k] for k in ENGINE_PARAMS])
_START = np.array([2.0, 1.3, 1e-3, 4e-5, 1.0])
_SCALE = np.array([1.0, 1.0, 1e-3, 1e-5, 1.0])
#: Rows a group needs for its own engine model (fewer: the engine's pooled model).
MIN_GROUP_ROWS = 40
N_TERMS = 34  # represented passes per request: (1 prefill + 16 decode) × ≤ 2 wave sizes


def _vendor(dev) -> str:
    v = str(getattr(dev, "vendor", "") or "").lower()
    return next((k for k in VENDORS if k in v), v or "unknown")


def _terms(work, dev, precision: str, decode_only: bool) -> np.ndarray:
    """``[5, N_TERMS]``: count, compute s, memory s, comm s (2 all-reduces per layer), decode
    flag per represented pass (zero-padded)."""
    from perfcast.llm.physics import all_reduce_s, device_rates

    peak, bw = device_rates(dev, precision)
    tc, tm = work.times(peak, bw)
    comm = 2 * work.layers * all_reduce_s(work.message_bytes, work.tp)
    cnt = work.count * (work.decode if decode_only else 1)
    out = np.zeros((5, N_TERMS))
    k = min(N_TERMS, len(cnt))
    out[0, :k], out[1, :k], out[2, :k] = cnt[:k], tc[:k], tm[:k]
    out[3, :k], out[4, :k] = np.broadcast_to(comm, cnt.shape)[:k], work.decode[:k]
    return out


def _llama_batches(row) -> tuple[int, int]:
    """llama.cpp's ``(n_batch, n_ubatch)`` of a row: its ``n_batch`` / ``n_ubatch`` columns,
    llama-bench's defaults (2,048; ``min(512, n_batch)``) where absent."""
    from perfcast.workload import LLAMA_CPP_N_BATCH, LLAMA_CPP_N_UBATCH

    def get(k):
        v = row.get(k) if hasattr(row, "get") else None
        return None if v is None or isna(v) else int(v)

    nb = get("n_batch") or LLAMA_CPP_N_BATCH
    return nb, get("n_ubatch") or min(LLAMA_CPP_N_UBATCH, nb)


def _work_for(row, arch, dev, target: str):
    from perfcast.llm.physics import request_work

    b = int(max(1, round(row["concurrent"])))
    engine = row["framework"]
    chunk = min(_llama_batches(row)) if engine == "llama.cpp" else None
    if target == "latency_s":
        return request_work(arch, dev, batch=b, input_len=int(row["input_len"]),
                            output_len=int(row["output_len"]), n_devices=int(row["n_devices"]),
                            precision=row["precision"], engine=engine, prompt_chunk=chunk)
    # serving (ML.ENERGY): one decode step of `concurrent` sequences at the mean context (the
    # prompt length is not published: the mean generated length stands for it)
    ctx = int(max(1, round(row["output_len"])))
    return request_work(arch, dev, batch=b, input_len=ctx, output_len=2,
                        n_devices=int(row["n_devices"]), precision=row["precision"],
                        engine=engine)


def features(frame: pd.DataFrame | Table, target: str = "latency_s",
             devices: dict | None = None) -> pd.DataFrame | Table:
    """The feature matrix of an LLM measurement / request frame (columns of
    :data:`perfcast.datasets.llm.LLM_COLUMNS`; ``concurrent`` defaults to ``batch_size``;
    llama.cpp rows read ``n_batch`` / ``n_ubatch``, :func:`_llama_batches`):
    one row per request with the model, request, hardware and physics features, ``bound_s``
    (the lower bound of the target: whole request, one decode step, or one step ÷ running
    batch), ``group`` (engine|vendor) and ``terms`` (the passes, for the engine model).
    ``devices`` maps device keys to :class:`~perfcast.devices.Device` objects (spec files);
    other keys are looked up in the registry. A table in, a table out; a frame in, a frame out
    (on its index)."""
    from perfcast.devices import get_device
    from perfcast.llm.arch import WEIGHT_BYTES, llm_arch
    from perfcast.llm.graphs import graph_summary
    from perfcast.llm.physics import bound_of

    df = frame.copy()
    if "concurrent" not in df.columns:
        df["concurrent"] = df["batch_size"]
    df["concurrent"] = df["concurrent"].fillna(df["batch_size"])
    decode_only = target != "latency_s"
    per_token = target == "token_time_s"
    rows = []
    for _, r in df.iterrows():
        arch = llm_arch(f"hf:{r['model']}")
        dev = (devices or {}).get(r["device"]) or get_device(r["device"])
        work = _work_for(r, arch, dev, target)
        g = bound_of(work, dev, r["precision"])
        terms = _terms(work, dev, r["precision"], decode_only)
        if decode_only:  # one decode step (÷ the running batch for the server's token time)
            terms[0] = terms[0] / max(terms[0].sum(), 1e-12)
            if per_token:
                terms[0] /= float(r["concurrent"])
        bound = float((terms[0] * np.maximum(terms[1], terms[2])).sum())
        comm = float((terms[0] * terms[3]).sum())
        peak16 = float(dev.peak_tflops("fp16") or dev.peak_tflops("bf16") or dev.peak_fp32_tflops)
        gs = graph_summary(arch.model_id)
        rows.append({
            "graph_nodes": float(gs["nodes"][0]) if gs else np.nan,
            "graph_edges": float(gs["edges"][0]) if gs else np.nan,
            "params_b": arch.params / 1e9,
            "active_params_b": arch.active_params(1) / 1e9, "layers": arch.layers,
            "hidden": arch.hidden, "heads": arch.heads, "kv_heads": arch.kv_heads,
            "head_dim": arch.head_dim, "intermediate": arch.intermediate, "vocab": arch.vocab,
            "max_positions": arch.max_positions or np.nan, "moe": float(arch.moe),
            "kv_kib_per_token": arch.kv_bytes_per_token(r["precision"]) / 1024,
            "weight_bytes_per_param": WEIGHT_BYTES[r["precision"]],
            # llama.cpp's rows (one sequence each) carry their n_batch in this feature — what
            # LLM-Inference-Bench's "Batch Size" column is for llama.cpp, and what the shipped
            # models were trained on; concurrent sequences are in `concurrent`
            "batch_size": float(_llama_batches(r)[0] if r["framework"] == "llama.cpp"
                                else r["batch_size"]),
            "concurrent": float(r["concurrent"]),
            "input_len": float(r["input_len"]) if notna(r["input_len"]) else np.nan,
            "output_len": float(r["output_len"]), "n_devices": float(r["n_devices"]),
            **{f"engine_{e}": float(r["framework"] == e) for e in ENGINES},
            "peak16_tflops": peak16, "bandwidth_tbs": float(dev.bandwidth_gbs) / 1e3,
            "memory_gb": float(dev.memory_gb), "tdp_w": float(dev.tdp_w or np.nan),
            "arch_year": float(dev.arch_year or np.nan), "l2_mb": float(dev.l2_mb or np.nan),
            "flop_per_byte": peak16 * 1e12 / (float(dev.bandwidth_gbs) * 1e9),
            **{f"vendor_{v}": float(_vendor(dev) == v) for v in VENDORS},
            "log_bound_s": math.log(bound), "log_prefill_s": math.log(max(g.prefill_s, 1e-9)),
            "log_decode_s": math.log(max(g.decode_s, 1e-9)),
            "log_first_step_s": math.log(max(g.first_step_s, 1e-9)), "waves": float(g.waves),
            "compute_bound_fraction": g.compute_bound_fraction,
            "log_tflop": math.log(max(float((terms[0] * terms[1]).sum()) * peak16, 1e-9)),
            "log_passes": math.log(max(float(terms[0].sum()), 1e-9)),
            "log_comm_over_bound": math.log1p(comm / bound), "bound_s": bound,
            "group": f"{r['framework']}|{_vendor(dev)}", "engine": r["framework"],
            "terms": terms,
        })
    if isinstance(df, Table):
        return Table.from_records(rows, columns=list(rows[0]) if rows else None)
    import pandas as pd

    return pd.DataFrame(rows, index=df.index)


# --------------------------------------------------------------------------------------------
# the engine model
# --------------------------------------------------------------------------------------------

def _stack(X: pd.DataFrame) -> np.ndarray:
    return np.stack(X["terms"].to_list()) if len(X) else np.zeros((0, 5, N_TERMS))


def engine_parts(theta, T: np.ndarray, layers: np.ndarray) -> dict[str, np.ndarray]:
    """The engine model's seconds per row, by part (compute- or memory-limited passes,
    overheads, communication) and by phase, for parameters ``theta`` (:data:`ENGINE_PARAMS`)
    and stacked terms ``T`` ``[n, 5, N_TERMS]``."""
    a, b, t0, t1, kappa = theta
    cnt, tc, tm, comm, dec = T[:, 0], T[:, 1], T[:, 2], T[:, 3], T[:, 4] > 0.5
    work = np.maximum(a * tc, b * tm)
    over = (t0 + t1 * layers[:, None]) * (cnt > 0)
    per = work + over + kappa * comm
    return {"total": (cnt * per).sum(1),
            "compute": (cnt * work * (a * tc >= b * tm)).sum(1),
            "memory": (cnt * work * (a * tc < b * tm)).sum(1),
            "overhead": (cnt * over).sum(1), "comm": (cnt * kappa * comm).sum(1),
            "prefill": (cnt * per * ~dec).sum(1), "decode": (cnt * per * dec).sum(1)}


def _fit_engine(T: np.ndarray, layers: np.ndarray, y: np.ndarray) -> list[float]:
    """Least squares on log(predicted / measured) with the bounds of :data:`ENGINE_PARAMS`."""
    from scipy.optimize import least_squares

    ly = np.log(y)

    def resid(z):
        return np.log(engine_parts(z * _SCALE, T, layers)["total"]) - ly

    res = least_squares(resid, _START / _SCALE, bounds=(_LOWER / _SCALE, np.inf),
                        loss="soft_l1", f_scale=0.2, max_nfev=400)
    return [float(v) for v in res.x * _SCALE]


class LLMGenerationPredictor:
    """One estimator for one target (module docstring). Parameters: ``target``
    (:data:`TARGETS`), ``target_mode`` (:data:`MODES`), ``hardware``
    (:data:`HARDWARE_FEATURES` keys), ``n_estimators``, ``max_depth``, ``learning_rate``,
    ``subsample``, ``residual_clip`` (engine mode: the booster's correction is clipped to
    ``exp(±clip)``), ``seed``."""

    name = "llm-xgboost"

    def __init__(self, target: str = "latency_s", target_mode: str = "blend",
                 hardware: str = "vendor", n_estimators: int = 600, max_depth: int = 6,
                 learning_rate: float = 0.05, subsample: float = 0.9,
                 residual_clip: float = 0.5, seed: int = 0):
        self.target = target
        self.target_mode = target_mode
        self.hardware = hardware
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.residual_clip = residual_clip
        self.seed = seed

    _PARAMS = ("target", "target_mode", "hardware", "n_estimators", "max_depth",
               "learning_rate", "subsample", "residual_clip", "seed")

    def get_params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._PARAMS}

    def set_params(self, **params) -> LLMGenerationPredictor:
        for k, v in params.items():
            if k not in self._PARAMS:
                raise PerfcastError(f"llm-xgboost: unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def _validate(self) -> None:
        from perfcast.errors import unknown_choice

        if self.target not in TARGETS:
            raise unknown_choice("LLM target", self.target, TARGETS)
        if self.hardware not in HARDWARE_FEATURES:
            raise unknown_choice("hardware feature set", self.hardware, HARDWARE_FEATURES)
        if self.target_mode not in MODES:
            raise unknown_choice("target_mode", self.target_mode, MODES)

    @property
    def _power(self) -> bool:
        return self.target == "power_per_device_w"

    def feature_names(self) -> list[str]:
        names = [*MODEL_FEATURES, *REQUEST_FEATURES, *PHYSICS_FEATURES]
        if self.target_mode == "direct":
            names += list(GRAPH_FEATURES)
        if self.target_mode == "engine" and not self._power:
            names += list(ENGINE_FEATURES)
        return names + list(HARDWARE_FEATURES[self.hardware])

    # ------------------------------------------------------------------ engine model
    def _engine_theta(self, group: str, engine: str) -> list[float]:
        """The engine model of ``engine|vendor``; an engine never seen on that vendor borrows
        the vendor's vLLM model (the engine the data has everywhere), then the engine's pooled
        one, then the pooled one."""
        e = self.engines_
        vendor = group.partition("|")[2]
        return e.get(group) or e.get(f"vllm|{vendor}") or e.get(engine) or e["*"]

    def engine_predict(self, X: pd.DataFrame) -> dict[str, np.ndarray]:
        """The engine model's parts (:func:`engine_parts`) per row of ``X``."""
        T, layers = _stack(X), X["layers"].to_numpy(float)
        keys = [f"{g}\n{e}" for g, e in zip(X["group"], X["engine"])]
        out: dict[str, np.ndarray] = {}
        for key in dict.fromkeys(keys):
            m = np.array([k == key for k in keys])
            g, e = key.split("\n")
            parts = engine_parts(self._engine_theta(g, e), T[m], layers[m])
            for name, v in parts.items():
                out.setdefault(name, np.zeros(len(X)))[m] = v
        return out

    def _with_engine(self, X: pd.DataFrame) -> pd.DataFrame:
        p = self.engine_predict(X)
        tot = np.maximum(p["total"], 1e-12)
        X = X.copy()
        X["engine_s"] = np.maximum(tot, X["bound_s"].to_numpy())
        X["log_engine_over_bound"] = np.log(X["engine_s"] / X["bound_s"])
        for k in ("compute", "memory", "overhead", "comm"):
            X[f"share_{k}"] = p[k] / tot
        X["engine_prefill_s"], X["engine_decode_s"] = p["prefill"], p["decode"]
        return X

    # ------------------------------------------------------------------ fit / predict
    def _y(self, y: np.ndarray, X: pd.DataFrame) -> np.ndarray:
        """The booster's target: log of the label (power: its fraction of TDP), or of its
        ratio to the bound / the engine model."""
        if self._power:
            return np.log(y / X["tdp_w"].to_numpy())
        if self.target_mode == "engine":
            return np.log(y / X["engine_s"].to_numpy())
        if self.target_mode == "residual":
            return np.log(y / X["bound_s"].to_numpy())
        return np.log(y)

    def fit(self, X: pd.DataFrame, y) -> LLMGenerationPredictor:
        """``X`` from :func:`features`; ``y`` the measured target (s or W)."""
        import xgboost as xgb

        self._validate()
        y = np.asarray(y, dtype=float)
        if len(y) != len(X) or not len(y) or not np.all(y > 0):
            raise PerfcastError("llm-xgboost: need as many positive labels as feature rows")
        if self.target_mode == "blend" and not self._power:
            self.members_ = [type(self)(**{**self.get_params(), **kw}).fit(X, y)
                             for kw in self._blend_members()]
            self.feature_names_ = self.members_[1].feature_names_
            self.engines_ = self.members_[0].engines_
            self.booster_ = None
            self.n_train_ = len(y)
            return self
        self.members_ = []
        self.engines_ = {}
        if self.target_mode == "engine" and not self._power:
            T, layers = _stack(X), X["layers"].to_numpy(float)
            groups = {"*": np.ones(len(X), bool)}
            for e in X["engine"].unique():
                groups[e] = (X["engine"] == e).to_numpy()
            for g in X["group"].unique():
                groups[g] = (X["group"] == g).to_numpy()
            for g, m in groups.items():
                if m.sum() >= MIN_GROUP_ROWS or g == "*":
                    self.engines_[g] = _fit_engine(T[m], layers[m], y[m])
            X = self._with_engine(X)
        self.feature_names_ = self.feature_names()
        z = self._y(y, X)
        self.booster_ = None
        if self.n_estimators > 0:
            d = xgb.DMatrix(X[self.feature_names_].to_numpy(float), label=z,
                            feature_names=self.feature_names_)
            params = {"max_depth": self.max_depth, "eta": self.learning_rate,
                      "subsample": self.subsample, "objective": "reg:squarederror",
                      "seed": self.seed, "nthread": max(1, (os.cpu_count() or 2) // 2)}
            self.booster_ = xgb.train(params, d, num_boost_round=self.n_estimators)
        self.n_train_ = len(y)
        return self

    def _blend_members(self) -> list[dict[str, Any]]:
        return [{"target_mode": "engine", "hardware": "none"},
                {"target_mode": "residual", "hardware": self.hardware}]

    def _z(self, X: pd.DataFrame) -> np.ndarray:
        if self.booster_ is None:
            return np.zeros(len(X))
        return np.asarray(self.booster_.inplace_predict(
            X[self.feature_names_].to_numpy(float), validate_features=False), dtype=float)

    def predict(self, X: pd.DataFrame, parts: bool = False):
        """Predictions in the target's unit; with ``parts`` also a dict of the engine model's
        prefill / decode seconds scaled like the prediction (engine mode) — what
        :func:`perfcast.generation.predict_generation` splits into TTFT and TPOT."""
        if not hasattr(self, "feature_names_"):
            raise PerfcastError("llm-xgboost: fit or load the predictor first")
        if getattr(self, "members_", None):
            (pe, info), pr = self.members_[0].predict(X, parts=True), self.members_[1].predict(X)
            out = np.sqrt(pe * pr)
            if not parts:
                return out
            scale = out / np.maximum(pe, 1e-12)
            return out, {"prefill_s": info["prefill_s"] * scale,
                         "decode_s": info["decode_s"] * scale, "engine_s": info["engine_s"]}
        if self.target_mode == "engine" and not self._power:
            X = self._with_engine(X)
        z = self._z(X)
        if self._power:  # a fraction of TDP, bounded to [idle, TDP] by the caller's energy path
            out = np.exp(np.minimum(z, 0.0)) * X["tdp_w"].to_numpy()
        elif self.target_mode == "engine":
            c = float(self.residual_clip)
            base = X["engine_s"].to_numpy()
            out = np.maximum(base * np.exp(np.clip(z, -c, c)), X["bound_s"].to_numpy())
        elif self.target_mode == "residual":
            out = np.exp(np.maximum(z, 0.0)) * X["bound_s"].to_numpy()  # ≥ the bound
        else:
            out = np.exp(z)
        if not parts:
            return out
        info: dict[str, np.ndarray] = {}
        if "engine_prefill_s" in X:
            scale = out / np.maximum((X["engine_prefill_s"] + X["engine_decode_s"]).to_numpy(),
                                     1e-12)
            info = {"prefill_s": X["engine_prefill_s"].to_numpy() * scale,
                    "decode_s": X["engine_decode_s"].to_numpy() * scale,
                    "engine_s": X["engine_s"].to_numpy()}
        return out, info

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike, trained_on: dict | None = None) -> Path:
        from safetensors.numpy import save_file

        from perfcast.paths import write_dir_atomically

        tensors, config = self._export()
        config.update(format=FORMAT, predictor=self.name, engine_params=ENGINE_PARAMS,
                      trained_on=trained_on or getattr(self, "trained_on_", {}))

        def fill(tmp: Path) -> None:
            (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=1))
            save_file(tensors, str(tmp / WEIGHTS_FILE))

        return write_dir_atomically(path, fill)

    def _export(self, prefix: str = "") -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(tensors, config) of this estimator and its blend members (``m0.`` / ``m1.``)."""
        tensors = {f"{prefix}none": np.zeros(1, np.uint8)}
        if self.booster_ is not None:
            tensors = {f"{prefix}booster": np.frombuffer(
                bytes(self.booster_.save_raw("json")), dtype=np.uint8).copy()}
        config = {"params": self.get_params(), "feature_names": self.feature_names_,
                  "n_train": self.n_train_, "engines": self.engines_, "members": []}
        for i, m in enumerate(getattr(self, "members_", None) or []):
            t, c = m._export(f"{prefix}m{i}.")
            tensors.update(t)
            config["members"].append(c)
        return tensors, config

    @classmethod
    def _restore(cls, config: dict, tensors: dict, prefix: str = "") -> LLMGenerationPredictor:
        self = cls(**config["params"])
        self.feature_names_ = config["feature_names"]
        self.n_train_ = config["n_train"]
        self.engines_ = config.get("engines", {})
        self.booster_ = None
        if f"{prefix}booster" in tensors:
            from perfcast.trees import load_booster

            # numpy trees (no XGBoost import); XGBoost itself for a model they do not cover
            self.booster_ = load_booster(np.asarray(tensors[f"{prefix}booster"], np.uint8))
            # a loaded model answers a few rows at a time: one thread (OpenMP's start-up on
            # every core costs ≈ 25 ms per call on a busy machine, the trees < 1 ms)
            self.booster_.set_param({"nthread": 1})
        self.members_ = [cls._restore(c, tensors, f"{prefix}m{i}.")
                         for i, c in enumerate(config.get("members", []))]
        return self

    @classmethod
    def load(cls, path: str | os.PathLike) -> LLMGenerationPredictor:
        from safetensors.numpy import load_file

        path = Path(path)
        try:
            config = json.loads((path / CONFIG_FILE).read_text())
            tensors = load_file(str(path / WEIGHTS_FILE))
        except (OSError, ValueError, KeyError) as exc:
            raise PerfcastError(f"cannot read the LLM model in {path}: {exc}") from None
        if config.get("format") != FORMAT:
            raise PerfcastError(f"{path}: not a {FORMAT} model (retrain with "
                                f"`perfcast train --recipe llm`)")
        self = cls._restore(config, tensors)
        self.trained_on_ = config.get("trained_on", {})
        return self


__all__ = ["ENGINES", "ENGINE_FEATURES", "ENGINE_PARAMS", "GRAPH_FEATURES",
           "HARDWARE_FEATURES", "LLMGenerationPredictor", "MODEL_FEATURES", "MODES",
           "PHYSICS_FEATURES", "REQUEST_FEATURES", "TARGETS", "engine_parts", "features"]
