"""The estimator contract every predictor follows, and its portable file format.

Like scikit-learn: ``__init__`` only stores hyper-parameters (no work, no validation);
``fit(train, valid=None)`` learns from a :class:`~perfcast.features.records.FeatureSet`
and returns ``self``; ``predict(data)`` returns ``[n, len(targets_)]`` in the targets' units
(ms, MiB, J). Fitted attributes end with ``_``.

A saved predictor is a directory: ``config.json`` (name, hyper-parameters, targets, feature
layout, training provenance, extra JSON state) + ``weights.safetensors`` (all tensors). No
pickle. Loading checks the feature-layout version and fails with a clear message when it does
not match this perfcast.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from perfcast.errors import PerfcastError
from perfcast.features.records import FEATURE_LAYOUT_VERSION, FeatureSet

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.safetensors"
FORMAT_VERSION = "1"


#: torch threads a torch predictor answers with: its networks are small, and more threads on a
#: busy machine spin in OpenMP instead of working (a cold ``perfcast predict --predictor
#: dnnperf`` measured 5.1 s with 2 threads, 2.8 s with 1, on this 2-core machine)
INFERENCE_THREADS = 1
_threads_lock = threading.Lock()
_threads_users = [0, None]  # predictions running, torch's thread count before the first


@contextlib.contextmanager
def inference_threads():
    """torch at :data:`INFERENCE_THREADS` threads while any prediction runs (torch's setting is
    per process: the first prediction in sets it, the last one out restores it — safe when
    several threads predict at once)."""
    import torch

    with _threads_lock:
        if _threads_users[0] == 0:
            _threads_users[1] = torch.get_num_threads()
            if _threads_users[1] > INFERENCE_THREADS:
                torch.set_num_threads(INFERENCE_THREADS)
        _threads_users[0] += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users[0] -= 1
            if _threads_users[0] == 0 and _threads_users[1] != torch.get_num_threads():
                torch.set_num_threads(_threads_users[1])


_blas_lock = threading.Lock()
_blas_users: list = [0, None]  # predictions running, the limiter that restores BLAS's threads


@contextlib.contextmanager
def numpy_threads():
    """numpy's BLAS at :data:`INFERENCE_THREADS` threads while a GNN answers in numpy — what
    :func:`inference_threads` is for torch: on a busy machine OpenBLAS's second thread makes a
    GNN's small matrix products wait rather than run (first user in sets it, last one out
    restores it). The products are split across threads by output block, so the answers are
    the same. Without ``threadpoolctl`` installed, nothing changes."""
    with _blas_lock:
        if _blas_users[0] == 0:
            try:
                from threadpoolctl import ThreadpoolController

                _blas_users[1] = ThreadpoolController().limit(limits=INFERENCE_THREADS,
                                                              user_api="blas")
            except ImportError:
                _blas_users[1] = None
        _blas_users[0] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users[0] -= 1
            if _blas_users[0] == 0 and _blas_users[1] is not None:
                _blas_users[1].restore_original_limits()
                _blas_users[1] = None


class LoadedArray(np.ndarray):
    """A numpy array read from ``weights.safetensors`` for a ``state_format = "numpy"``
    predictor — with ``torch.Tensor``'s ``.numpy()``, so state code written for tensors reads
    it unchanged."""

    def numpy(self) -> np.ndarray:
        return self.view(np.ndarray)


#: :meth:`Predictor.recalibrate` fits a slope from this many labeled records on (a scale below).
MIN_SLOPE_RECORDS = 32


class Predictor:
    """Base class. Subclasses set ``name``, define ``_fit`` / ``_predict`` and (if they hold
    tensors or JSON state) ``_state`` / ``_set_state``."""

    name: ClassVar[str] = ""
    #: Targets it can learn (a subset of ``features.TARGETS``); ``None`` = any.
    supported_targets: ClassVar[tuple[str, ...] | None] = None
    #: Does it learn from labels? (``roofline`` does not.)
    learns: ClassVar[bool] = True
    #: Does it read ``FeatureSet.graphs``? (Static-feature predictors do not; ``perfcast
    #: predict`` then skips building the PyG graph.)
    uses_graphs: ClassVar[bool] = True
    #: Does it read ``FeatureSet.plans`` (kernel plans, :mod:`perfcast.features.kernels`)?
    uses_plans: ClassVar[bool] = False
    #: Does it extrapolate by physics (crossdevice, kernelsum, roofline: work at learned or
    #: measured rates), so that routing uses it outside its training data as it is? A learned
    #: model that does not (``False``) answers only inside its :attr:`support_`
    #: (:mod:`perfcast.predictors.support`); outside it the physics base answers.
    extrapolates: ClassVar[bool] = False
    #: What :meth:`_set_state` receives from ``weights.safetensors``: ``"torch"`` tensors, or
    #: ``"numpy"`` arrays (:class:`LoadedArray`, read without importing torch — the predictors
    #: whose answers need no torch: trees, linear models, the numpy MLP, the GNNs answering
    #: through :mod:`perfcast.predictors.numpy_gnn`).
    state_format: ClassVar[str] = "torch"

    def __init__(self, **params: Any) -> None:
        self.params = dict(params)

    # -- sklearn-style parameter access ---------------------------------------------------
    #: Hyper-parameters every learned predictor has. ``per_sample_time``: learn ``time_ms`` per
    #: sample (÷ batch size) and multiply back at prediction. The public benchmarks measure each
    #: model at one batch size only (the largest that fits), so batch and model size are
    #: confounded; a per-sample target makes "time grows with batch" the prior instead of
    #: something a tree or network has to discover (see BENCHMARKS.md).
    COMMON_PARAMS: ClassVar[dict[str, Any]] = {"per_sample_time": False}

    def get_params(self) -> dict[str, Any]:
        return {**self.known_params(), **self.params}

    @classmethod
    def known_params(cls) -> dict[str, Any]:
        """Every hyper-parameter with its default (the class's and the common ones)."""
        return {**(cls.COMMON_PARAMS if cls.learns else {}), **cls.default_params()}

    def set_params(self, **params: Any) -> Predictor:
        self.params.update(params)
        return self

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        return {}

    def p(self, key: str) -> Any:
        return self.get_params()[key]

    # -- contract -----------------------------------------------------------------------------
    def fit(self, train: FeatureSet, valid: FeatureSet | None = None, *,
            targets: list[str] | None = None, progress=None) -> Predictor:
        """Learn ``targets`` (default: every target ``train`` has labels for)."""
        _check_set(train, "training")
        unknown = set(self.get_params()) - set(self.known_params())
        if unknown:
            raise PerfcastError(f"{self.name}: unknown hyper-parameter(s) {sorted(unknown)} "
                                f"(known: {sorted(self.known_params())})")
        targets = list(targets) if targets else train.labeled_targets()
        if self.supported_targets is not None:
            targets = [t for t in targets if t in self.supported_targets]
        if not targets:
            raise PerfcastError(f"{self.name}: no labeled target to learn in {len(train)} records")
        labeled = set(train.labeled_targets())
        for t in targets:
            if t not in train.target_names:
                raise PerfcastError(f"{self.name}: unknown target {t!r}")
            if self.learns and t not in labeled:
                raise PerfcastError(f"{self.name}: no label for target {t!r} in the training data")
        self.targets_ = targets
        self.static_names_ = list(train.static_names)
        self.layout_ = train.layout
        self.history_: list[dict[str, float]] = []
        self.trained_on_: dict[str, Any] = _provenance(train)
        self.calibration_: dict[str, tuple[float, float, int]] = {}
        from perfcast.predictors.support import Support

        #: the batches and model sizes it learned from (every labeled record it saw)
        self.support_ = Support.of_feature_sets(train, valid) if self.learns else None
        self._fit(self._per_sample(train), self._per_sample(valid) if valid is not None else None,
                  progress)
        return self

    def _label_matrix(self, data: FeatureSet, targets=None) -> np.ndarray:
        """Labels ``[len(data), len(targets_)]`` in the order of ``targets_``; NaN where a
        record has none, or for a target not in ``targets`` (default: every one of
        ``targets_``) or not in ``data``."""
        out = np.full((len(data), len(self.targets_)), np.nan)
        for j, t in enumerate(self.targets_):
            if (targets is None or t in targets) and t in data.target_names:
                out[:, j] = data.target(t)
        return out

    def _scaled_labels(self, data: FeatureSet, targets=None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_label_matrix` through ``target_scaler_``: float32 standardised labels (0
        where there is none) and the boolean mask of the real ones."""
        z = self.target_scaler_.transform(self._label_matrix(data, targets))
        mask = np.isfinite(z)
        return np.where(mask, z, 0.0).astype(np.float32), mask

    def _time_scale(self, data: FeatureSet) -> np.ndarray | None:
        """Batch size per record when ``time_ms`` is learned per sample, else ``None``."""
        if not (self.learns and self.get_params().get("per_sample_time")):
            return None
        if "batch_size" not in data.rows.columns:
            raise PerfcastError(f"{self.name}: records need a batch_size")
        return data.rows["batch_size"].to_numpy(dtype=np.float64)

    def _per_sample(self, data: FeatureSet) -> FeatureSet:
        b = self._time_scale(data)
        if b is None or "time_ms" not in data.target_names:
            return data
        out = data.subset(np.arange(len(data)))
        out.y = data.y.copy()
        out.y[:, data.target_names.index("time_ms")] /= b
        return out

    def predict(self, data: FeatureSet) -> np.ndarray:
        """``[len(data), len(targets_)]`` predictions (ms, MiB, J); a :meth:`recalibrate`-d
        predictor maps each calibrated target's log prediction by its ``a + b·log``."""
        out = self._raw_predict(data)
        for t, (a, b, _) in (getattr(self, "calibration_", None) or {}).items():
            if t in self.targets_ and len(out):
                j = self.targets_.index(t)
                with np.errstate(divide="ignore", invalid="ignore"):
                    out[:, j] = np.exp(a + b * np.log(out[:, j]))
        return out

    def recalibrate(self, data: FeatureSet, *, targets: list[str] | None = None,
                    slope: bool | None = None) -> Predictor:
        """Few-shot transfer to another device without retraining: keep the model and map its
        prediction to ``data``'s labels by ``log y = a + b·log ŷ`` per target (least squares on
        the labeled records; ``b`` is fixed to 1 — a pure scale — below
        :data:`MIN_SLOPE_RECORDS` records or with ``slope=False``). Replaces an earlier
        calibration; saved with the predictor."""
        if not hasattr(self, "targets_"):
            raise PerfcastError(f"{self.name}: recalibrate needs a fitted predictor")
        raw = self._raw_predict(data)
        cal = {}
        for t in (targets or [t for t in self.targets_ if t in data.labeled_targets()]):
            if t not in self.targets_:
                raise PerfcastError(f"{self.name}: does not predict {t!r}")
            y = data.target(t)
            yhat = raw[:, self.targets_.index(t)]
            ok = np.isfinite(y) & (y > 0) & np.isfinite(yhat) & (yhat > 0)
            n = int(ok.sum())
            if n == 0:
                raise PerfcastError(f"{self.name}: no labeled record of {t!r} to recalibrate on")
            x, z = np.log(yhat[ok]), np.log(y[ok])
            fit_slope = (n >= MIN_SLOPE_RECORDS) if slope is None else bool(slope) and n >= 2
            if fit_slope and np.ptp(x) > 0:
                b, a = np.polyfit(x, z, 1)
            else:
                a, b = float(np.mean(z - x)), 1.0
            cal[t] = (float(a), float(b), n)
        if not cal:
            raise PerfcastError(f"{self.name}: no labeled target to recalibrate on")
        self.calibration_ = cal
        return self

    def _raw_predict(self, data: FeatureSet) -> np.ndarray:
        if not hasattr(self, "targets_"):
            raise PerfcastError(f"{self.name}: predictor is not fitted (call fit or load)")
        _check_set(data, "prediction", require_labels=False)
        if list(data.static_names) != list(self.static_names_):
            raise PerfcastError(f"{self.name}: feature set has other static features than the "
                                f"ones this predictor was trained on")
        if len(data) == 0:
            return np.zeros((0, len(self.targets_)))
        if self.state_format == "torch":
            with inference_threads():
                raw = self._predict(data)
        else:
            raw = self._predict(data)
        out = np.asarray(raw, dtype=np.float64).reshape(len(data), -1)
        b = self._time_scale(data)
        if b is not None and "time_ms" in self.targets_:
            out[:, self.targets_.index("time_ms")] *= b
        return out

    def _fit(self, train: FeatureSet, valid: FeatureSet | None, progress) -> None:
        raise NotImplementedError

    def _predict(self, data: FeatureSet) -> np.ndarray:
        raise NotImplementedError

    # -- persistence ------------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(tensors, json_state)`` of a fitted predictor (tensors: name → torch.Tensor or
        numpy array)."""
        return {}, {}

    def _set_state(self, tensors: dict[str, Any], state: dict[str, Any]) -> None:
        pass

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``path/config.json`` + ``path/weights.safetensors`` atomically."""
        if not hasattr(self, "targets_"):
            raise PerfcastError(f"{self.name}: cannot save an unfitted predictor")
        import torch
        from safetensors.torch import save_file

        tensors, state = self._state()
        # (np.array, not np.ascontiguousarray: that makes a 0-d array — BatchNorm's
        # num_batches_tracked — 1-d)
        tensors = {k: (torch.as_tensor(np.array(v, order="C")) if isinstance(v, np.ndarray)
                       else v.detach().cpu().contiguous()) for k, v in tensors.items()}
        config = {"format": FORMAT_VERSION, "predictor": self.name,
                  "params": _jsonable(self.get_params()), "targets": self.targets_,
                  "feature_layout": self.layout_, "static_names": self.static_names_,
                  "trained_on": self.trained_on_, "history": self.history_,
                  "calibration": {t: list(v) for t, v in
                                  (getattr(self, "calibration_", None) or {}).items()},
                  "state": _jsonable(state)}
        if getattr(self, "support_", None) is not None:
            config["support"] = self.support_.to_json()
        from perfcast.paths import write_dir_atomically

        def fill(tmp: Path) -> None:
            (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=1))
            save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"predictor": self.name,
                                                                   "feature_layout": self.layout_})

        return write_dir_atomically(path, fill)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Predictor:
        """Load a saved predictor (any registered kind when called on the base class)."""
        from perfcast.predictors import get_predictor_class

        from perfcast.paths import read_dir_config

        path = Path(path)
        cfg = read_dir_config(path, CONFIG_FILE, "perfcast predictor")
        if cfg.get("feature_layout") != FEATURE_LAYOUT_VERSION:
            raise PerfcastError(
                f"{path}: predictor was trained on feature layout {cfg.get('feature_layout')!r}, "
                f"this perfcast computes {FEATURE_LAYOUT_VERSION!r} — retrain it "
                f"(perfcast train) or use the perfcast version that wrote it")
        klass = get_predictor_class(cfg.get("predictor", ""))
        if cls is not Predictor and not issubclass(klass, cls):
            raise PerfcastError(f"{path}: holds a {klass.name!r} predictor, not {cls.name!r}")
        obj = klass(**cfg.get("params", {}))
        obj.targets_ = list(cfg["targets"])
        obj.static_names_ = list(cfg["static_names"])
        obj.layout_ = cfg["feature_layout"]
        obj.trained_on_ = cfg.get("trained_on", {})
        obj.history_ = cfg.get("history", [])
        obj.calibration_ = {t: (float(v[0]), float(v[1]), int(v[2]))
                            for t, v in (cfg.get("calibration") or {}).items()}
        from perfcast.predictors.support import Support

        obj.support_ = Support.from_json(cfg.get("support"))
        tensors: dict[str, Any] = {}
        wpath = path / WEIGHTS_FILE
        if wpath.exists():
            from safetensors import SafetensorError

            try:
                if klass.state_format == "numpy":
                    from safetensors.numpy import load_file

                    tensors = {k: v.view(LoadedArray) for k, v in load_file(str(wpath)).items()}
                else:
                    from safetensors.torch import load_file

                    tensors = load_file(str(wpath))
            except (SafetensorError, OSError, ValueError, TypeError) as exc:
                raise PerfcastError(f"{wpath}: corrupt weights file ({exc})") from None
        obj._set_state(tensors, cfg.get("state", {}))
        return obj

    def __repr__(self) -> str:
        ps = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({ps})"


def _check_set(data: FeatureSet, what: str, require_labels: bool = True) -> None:
    if not isinstance(data, FeatureSet):
        raise PerfcastError(f"{what} data must be a perfcast FeatureSet, got {type(data).__name__}")
    if data.layout != FEATURE_LAYOUT_VERSION:
        raise PerfcastError(f"{what} data has feature layout {data.layout!r}, expected "
                            f"{FEATURE_LAYOUT_VERSION!r}")
    if require_labels and len(data) == 0:
        raise PerfcastError(f"{what} data is empty")


def _provenance(train: FeatureSet) -> dict[str, Any]:
    rows = train.rows
    out: dict[str, Any] = {"records": len(train), "graphs": len(set(train.graph_index.tolist()))}
    for col in ("device", "mode", "precision", "source"):
        if col in rows.columns:
            out[col] = sorted(map(str, rows[col].dropna().unique()))
    if "family" in rows.columns:
        out["families"] = int(rows["family"].nunique())
    if "has_memsim" in train.static_names and len(train):
        out["memsim"] = bool(train.static[:, list(train.static_names).index("has_memsim")].mean() > 0.5)
    out["labels"] = {t: int(np.isfinite(train.y[:, j]).sum()) for j, t in enumerate(train.target_names)}
    return out


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not np.isfinite(obj):
        return None  # strict JSON has no NaN / inf
    if isinstance(obj, np.generic):
        return _jsonable(obj.item())
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return obj


# -- helpers shared by learned predictors ---------------------------------------------------

class TorchFromWeights:
    """A predictor that answers in numpy from its loaded weights and holds a torch network only
    to train: ``net_`` is built from the weights (``self.__dict__["_weights"]``, numpy arrays by
    ``state_dict`` name) on first use by :meth:`_net_from_weights`; setting ``net_`` (a network
    trained in this process) drops the weights it supersedes."""

    def _net_from_weights(self, weights: dict[str, Any]):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def net_(self):
        net = self.__dict__.get("_net")
        if net is None:
            weights = self.__dict__.get("_weights")
            if weights is None:
                raise AttributeError("net_")
            net = self._net_from_weights(weights)
            net.eval()
            self.__dict__["_net"] = net
        return net

    @net_.setter
    def net_(self, net) -> None:
        self.__dict__.update(_net=net, _weights=None)


class WarmStart:
    """Mixin for predictors with a ``warm_start`` hyper-parameter: ``fit`` on a fitted predictor
    with ``warm_start=True`` continues training it. During ``_fit``, ``self._warm`` holds what
    the base ``fit`` overwrites (``targets``, ``static_names``, ``history``, ``trained_on``; or
    ``None`` for a fresh fit); a failed fit leaves the predictor as it was. Put it before
    :class:`Predictor` in the bases."""

    def fit(self, train: FeatureSet, valid: FeatureSet | None = None, *,
            targets: list[str] | None = None, progress=None):
        before = dict(self.__dict__)
        self._warm = None
        if self.get_params().get("warm_start") and hasattr(self, "net_"):
            self._warm = {"targets": list(self.targets_), "static_names": list(self.static_names_),
                          "history": list(self.history_), "trained_on": dict(self.trained_on_)}
        try:
            super().fit(train, valid, targets=targets, progress=progress)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise
        finally:
            self.__dict__.pop("_warm", None)
        return self


def load_net_state(name: str, net, state: dict) -> None:
    """``net.load_state_dict(state)`` with the one-line error of a saved predictor whose weights
    do not match the architecture its config describes."""
    try:
        net.load_state_dict(state)
    except RuntimeError as exc:
        raise PerfcastError(f"{name}: saved weights do not match the architecture "
                            f"({exc})") from None


class BestEpoch:
    """Early stopping on a validation loss for the learned predictors: :meth:`update` after each
    epoch's validation pass keeps a copy of the weights of the best epoch (an improvement must
    exceed ``tol``), :attr:`stop` once ``patience`` epochs in a row brought none (never with
    ``patience=None``), :meth:`restore` puts the best weights back. ``snapshot(net)`` /
    ``load(net, state)`` choose what is copied (default: the whole ``state_dict``)."""

    def __init__(self, patience: int | None = None, tol: float = 1e-9, snapshot=None,
                 load=None) -> None:
        import copy

        self.patience, self.tol = patience, float(tol)
        self.best, self.state, self.bad = float("inf"), None, 0
        self._snapshot = snapshot or (lambda net: copy.deepcopy(net.state_dict()))
        self._load = load or (lambda net, state: net.load_state_dict(state))

    def update(self, loss: float, net) -> bool:
        """Record one epoch's validation ``loss``; True if it is the best so far."""
        if loss < self.best - self.tol:
            self.best, self.bad, self.state = float(loss), 0, self._snapshot(net)
            return True
        self.bad += 1
        return False

    @property
    def stop(self) -> bool:
        return self.patience is not None and self.bad >= self.patience

    def restore(self, net) -> None:
        """The best epoch's weights into ``net`` (nothing if no validation pass happened)."""
        if self.state is not None:
            self._load(net, self.state)


class TargetScaler:
    """Standardisation of targets, per target, statistics from the training labels only (NaN
    labels ignored). ``log=True`` (the default everywhere): ``z = (log(y) - mean) / std`` — a
    squared or Huber loss on ``z`` is then a loss on the *relative* error, what MAPE measures;
    ``log=False``: ``z = (y - mean) / std`` (absolute error; kept for the ablation in
    BENCHMARKS.md)."""

    def __init__(self, mean: np.ndarray, std: np.ndarray, log: bool = True) -> None:
        self.mean = np.asarray(mean, np.float64)
        self.std = np.asarray(std, np.float64)
        self.log = bool(log)

    @classmethod
    def fit(cls, y: np.ndarray, log: bool = True) -> TargetScaler:
        ly = np.where(y > 0, y, np.nan)
        ly = np.log(ly) if log else ly
        mean = np.nan_to_num(np.nanmean(ly, axis=0)) if np.isfinite(ly).any() else np.zeros(y.shape[1])
        std = np.nanstd(ly, axis=0) if np.isfinite(ly).any() else np.ones(y.shape[1])
        std = np.where(np.isfinite(std) & (std > 1e-6), std, 1.0)
        return cls(mean, std, log)

    def transform(self, y: np.ndarray) -> np.ndarray:
        v = np.where(y > 0, y, np.nan)
        return ((np.log(v) if self.log else v) - self.mean) / self.std

    def inverse(self, z: np.ndarray) -> np.ndarray:
        v = np.asarray(z, np.float64) * self.std + self.mean
        if self.log:
            return np.exp(v)
        return np.maximum(v, 1e-6)  # a linear-space model may predict ≤ 0; times are > 0


class FeatureScaler:
    """Standardisation of static features (statistics from training records only)."""

    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)

    @classmethod
    def fit(cls, x: np.ndarray) -> FeatureScaler:
        std = x.std(axis=0)
        return cls(x.mean(axis=0), np.where(std > 1e-6, std, 1.0))

    def transform(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std).astype(np.float32)
