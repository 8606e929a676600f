"""Python API. ``perfcast.load_graph`` mirrors ``perfcast inspect``, ``perfcast.predict``
``perfcast predict``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError
from perfcast.graph import ModelGraph


def load_graph(model: Any, *, batch_size: int | None = None,
               input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
               mode: str = "infer", precision: str = "fp32", optimizer: str = "sgd-momentum",
               example_inputs: tuple | None = None, use_cache: bool = True) -> ModelGraph:
    """Computation graph of ``model``: a spec string (see README) or an ``nn.Module``.

    For an ``nn.Module`` give ``example_inputs`` (meta tensors are best: nothing is computed) or
    an ``input_size`` (per sample, e.g. ``(3, 224, 224)``); module graphs are not cached.
    """
    from perfcast.frontends import GraphRequest, parse_input_size

    if isinstance(input_size, str):
        input_size = parse_input_size(input_size)
    if isinstance(model, str):
        from perfcast.cache import get_graph

        req = GraphRequest(spec=model, batch_size=batch_size,
                           input_size=tuple(input_size) if input_size else None, seq_len=seq_len,
                           mode=mode, precision=precision, optimizer=optimizer)
        return get_graph(req, use_cache=use_cache)

    import torch
    from torch import nn

    from perfcast.frontends.torch_frontend import graph_from_module

    if not isinstance(model, nn.Module):
        raise PerfcastError(f"model must be a spec string or a torch.nn.Module, "
                            f"not {type(model).__name__}")
    GraphRequest(spec="module", batch_size=batch_size,
                 input_size=tuple(input_size) if input_size else None, mode=mode,
                 precision=precision, optimizer=optimizer).validate()
    if example_inputs is None:
        if input_size is None:
            raise PerfcastError("give example_inputs or input_size for an nn.Module")
        example_inputs = (torch.empty((batch_size or 1, *input_size), device="meta"),)
    first = example_inputs[0] if example_inputs else None
    bs = batch_size or (int(first.shape[0]) if isinstance(first, torch.Tensor) and first.dim() else 1)
    return graph_from_module(model, tuple(example_inputs), model_id=type(model).__name__,
                             batch_size=bs, mode=mode, precision=precision, optimizer=optimizer)


# --------------------------------------------------------------------------------------------
# predict
# --------------------------------------------------------------------------------------------

#: Batch size ``predict`` uses when none is given: 1 for inference, 32 for a training step.
DEFAULT_BATCH = {"infer": 1, "train": 32}


@dataclass
class Prediction:
    """One forecast. ``time_ms`` is per batch (latency or training step time, ms);
    ``throughput_samples_per_s`` = batch ÷ time; ``memory_mb`` is the peak device memory (MiB);
    ``energy_j`` is per batch (J) and ``power_w`` its mean power (W). A value no predictor can give
    is ``None`` and ``notes`` says why. ``predictor`` / ``trained_on`` map each target to the
    predictor that answered it and the data it learned from."""

    model: str
    device: str
    mode: str
    precision: str
    batch_size: int
    input_size: list[int] | None = None
    seq_len: int | None = None
    time_ms: float | None = None
    throughput_samples_per_s: float | None = None
    memory_mb: float | None = None
    energy_j: float | None = None
    power_w: float | None = None
    predictor: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _learning_request(model: str, input_size, seq_len):
    """The graph request of a spec's learning graph: forward, fp32, the reference batch (see
    perfcast.predictors.graphs)."""
    from perfcast.frontends import GraphRequest
    from perfcast.predictors.graphs import REF_BATCH

    return GraphRequest(spec=model, batch_size=REF_BATCH,
                        input_size=tuple(input_size) if input_size else None, seq_len=seq_len,
                        mode="infer", precision="fp32")


def _learning_graph(model: Any, input_size, seq_len, example_inputs, use_cache: bool):
    """Forward fp32 graph at the reference batch (see perfcast.predictors.graphs)."""
    from perfcast.predictors.graphs import REF_BATCH

    if isinstance(model, str):
        from perfcast.cache import get_graph

        return get_graph(_learning_request(model, input_size, seq_len), use_cache=use_cache)
    if example_inputs is not None:  # keep the user's example batch; features rescale to batch
        return load_graph(model, example_inputs=example_inputs, mode="infer", precision="fp32")
    return load_graph(model, batch_size=REF_BATCH, input_size=input_size, mode="infer",
                      precision="fp32")


def predict(model: Any, *, device: str, batch_size: int | None = None,
            input_size: tuple[int, ...] | str | None = None, seq_len: int | None = None,
            mode: str = "infer", precision: str | None = None, optimizer: str = "sgd-momentum",
            predictor: str | None = None, example_inputs: tuple | None = None,
            use_cache: bool = True, overlap_simulation: bool = False,
            runtime_overhead_mb: float | None = None) -> Prediction:
    """Forecast time, memory and energy of ``model`` on ``device``.

    ``model``: a spec string (``timm:resnet50``, ``hf:gpt2``, ``path/model.onnx`` …) or an
    ``nn.Module`` with ``example_inputs`` or ``input_size``. ``predictor``: a registry name to
    pick among the shipped models (e.g. ``xgboost``, ``dippm``, ``roofline``) or the directory of a
    saved predictor (``perfcast train`` output). ``precision=None``: the precision perfcast has
    measurements for on that device and mode when there is exactly one (e.g. ``amp`` for the RTX
    3090 training data), else ``fp32`` — a note says which was used. Devices without labeled data fall back to the
    roofline (time) and the tensor-memory simulation (memory), and say so in ``notes``.
    ``runtime_overhead_mb``: GPU memory beyond live tensors added to simulated memory (default:
    the median measured on real runs, see :mod:`perfcast.memory.overhead`; 0 = tensors only).
    ``overlap_simulation``: when the graph is not cached yet, run the memory simulation in a
    forked child process meanwhile (the CLI does: a fresh process; ≈ 1 s off a cold start).
    """
    from perfcast.devices import get_device
    from perfcast.frontends import MODES, PRECISIONS, parse_input_size
    from perfcast.predictors import shipped

    dev = get_device(device)
    if mode not in MODES:
        raise PerfcastError(f"unknown mode {mode!r} (use {' or '.join(MODES)})")
    auto_note = None
    if precision is None:
        measured = sorted({e["precision"] for e in shipped.manifest()
                           if (e["device"], e["mode"]) == (dev.key, mode)})
        precision = measured[0] if len(measured) == 1 else "fp32"
        if measured:
            auto_note = (f"precision: {precision} (what the {dev.key} {mode} measurements used"
                         f"{'; measured: ' + ', '.join(measured) if len(measured) > 1 else ''}; "
                         f"pass --precision to choose)")
    if precision not in PRECISIONS:
        raise PerfcastError(f"unknown precision {precision!r} (use {', '.join(PRECISIONS)})")
    if batch_size is None:
        batch_size = DEFAULT_BATCH[mode]
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise PerfcastError(f"batch size must be a positive integer, got {batch_size!r}")
    if isinstance(input_size, str):
        input_size = parse_input_size(input_size)
    if runtime_overhead_mb is not None and not runtime_overhead_mb >= 0:
        raise PerfcastError(f"runtime overhead must be ≥ 0 MiB, got {runtime_overhead_mb}")
    sim_job = None
    if overlap_simulation and use_cache and _simulation_applies(model):
        from perfcast.predictors.data import SimulationJob

        if not _graph_cached(model, input_size, seq_len):
            _import_framework(model)  # once, before forking: parent and child both need it
            sim_job = SimulationJob.start(_memsim_record(
                model, mode, batch_size, seq_len, input_size, optimizer, precision))
    try:
        return _predict(model, dev, batch_size, input_size, seq_len, mode, precision, optimizer,
                        predictor, example_inputs, use_cache, auto_note, sim_job,
                        runtime_overhead_mb)
    finally:
        if sim_job is not None:
            sim_job.cancel()


def _simulation_applies(model: Any) -> bool:
    """The tensor-memory simulation runs from PyTorch model specs (not ONNX, not modules)."""
    return isinstance(model, str) and not model.lower().endswith(".onnx")


def _import_framework(model: str) -> None:
    """Import the model library a spec needs (timm / torchvision / transformers)."""
    import importlib

    from perfcast.frontends import split_spec

    lib = {"timm": "timm", "torchvision": "torchvision", "hf": "transformers"}.get(
        split_spec(model)[0])
    if lib:
        try:
            importlib.import_module(lib)
        except ImportError:
            pass  # the frontend reports it


def _memsim_record(model: str, mode: str, batch_size: int, seq_len: int | None,
                   input_size, optimizer: str, precision: str) -> dict:
    """The record keying the simulation cache (``input_size`` per sample or None = default)."""
    return {"model": model, "mode": mode, "batch_size": batch_size, "seq_len": seq_len,
            "input_size": ",".join(map(str, input_size)) if input_size else None,
            "optimizer": optimizer, "precision": precision}


def _graph_cached(model: str, input_size, seq_len) -> bool:
    from perfcast.cache import cache_path

    try:
        return cache_path(_learning_request(model, input_size, seq_len)).exists()
    except (PerfcastError, OSError):
        return True  # let the normal path report the problem


def _predict(model, dev, batch_size, input_size, seq_len, mode, precision, optimizer, predictor,
             example_inputs, use_cache, auto_note, sim_job, overhead_mb) -> Prediction:
    import numpy as np
    import pandas as pd

    from perfcast.predictors import shipped
    from perfcast.predictors.features import (TARGETS, FeatureSet, GraphSummary, graph_data,
                                              static_features)

    graph = _learning_graph(model, input_size, seq_len, example_inputs, use_cache)
    label = model if isinstance(model, str) else type(model).__name__
    shape = list(graph.meta.input_shapes[0][1:]) if graph.meta.input_shapes else None
    out = Prediction(model=label, device=dev.key, mode=mode, precision=precision,
                     batch_size=batch_size, input_size=list(input_size) if input_size else shape,
                     seq_len=seq_len)
    if auto_note:
        out.notes.append(auto_note)
    summary = GraphSummary.of(graph)
    gcache: list = []

    def gdata():  # the PyG graph, built only for predictors that read it
        if not gcache:
            gcache.append(graph_data(graph))
        return gcache[0]

    memsim_cache: dict[str, float | None] = {}

    def memsim() -> float | None:
        if "v" not in memsim_cache:
            memsim_cache["v"] = None
            if not _simulation_applies(model):
                out.notes.append("tensor-memory simulation needs a PyTorch model spec "
                                 "(not available for ONNX files or in-process modules)")
            else:
                from perfcast.predictors.data import MemsimCache

                shape = (input_size if input_size else
                         None if model.startswith("hf:") or seq_len else out.input_size)
                rec = _memsim_record(model, mode, batch_size, seq_len, shape, optimizer,
                                     precision)
                cache = MemsimCache() if use_cache else None
                try:
                    value, known = None, False
                    if cache is not None and cache.contains(rec):
                        value, known = cache.get(rec), True
                    elif sim_job is not None:  # same record, maybe with the default input size
                        v, sim_shape = sim_job.result()
                        if (sim_job.rec["input_size"] == rec["input_size"]
                                or sim_shape == list(shape or [])):
                            value, known = v, True
                            if cache is not None:
                                cache.put(rec, v)
                    if not known:
                        value = (cache.get(rec, strict=True) if cache is not None
                                 else MemsimCache.simulate(rec))
                    memsim_cache["v"] = value
                except PerfcastError as exc:
                    out.notes.append(f"tensor-memory simulation failed: {exc}")
        return memsim_cache["v"]

    def one_record(with_memsim: bool, need_graph: bool = True) -> FeatureSet:
        mem = memsim() if with_memsim else None
        st = static_features(summary, batch_size, mode, precision,
                             optimizer if mode == "train" else None, mem)
        rows = pd.DataFrame([{"model": label, "family": "", "device": dev.key, "mode": mode,
                              "precision": precision, "batch_size": batch_size,
                              "optimizer": optimizer if mode == "train" else None}])
        return FeatureSet(rows=rows, static=st[None, :], graph_index=np.zeros(1, np.int64),
                          graphs=[gdata() if need_graph else None], y=np.full((1, len(TARGETS)), np.nan),
                          summaries=[summary])

    def run(pred, with_memsim: bool, target: str) -> float | None:
        values = pred.predict(one_record(with_memsim, pred.uses_graphs))
        v = float(values[0, pred.targets_.index(target)])
        return v if np.isfinite(v) and v > 0 else None

    user_pred = None
    if predictor and _looks_like_path(predictor):
        from perfcast.predictors import load_predictor

        user_pred = load_predictor(predictor)
        devs = user_pred.trained_on_.get("device") or []
        if devs and dev.key not in devs:
            out.notes.append(f"{predictor} was trained on {', '.join(devs)}, not {dev.key}")

    desc = f"{dev.key} {mode} {precision}"
    gpu_overhead, overhead_src = 0.0, ""
    if dev.is_gpu:
        from perfcast.memory.overhead import runtime_overhead

        rec = runtime_overhead()
        gpu_overhead = float(rec["runtime_overhead_mb"] if overhead_mb is None else overhead_mb)
        overhead_src = (f"median of {rec['runs']} measured runs, {rec['device']}"
                        if overhead_mb is None else "given")
    for target in TARGETS:
        value = None
        if user_pred is not None and target in user_pred.targets_:
            value = run(user_pred, bool(user_pred.trained_on_.get("memsim")), target)
            out.predictor[target] = f"{user_pred.name} ({predictor})"
            out.trained_on[target] = user_pred.trained_on_
        else:
            name = None if user_pred is not None else predictor
            if name == "roofline" and target != "time_ms":
                name = None  # the roofline answers time only; other targets use the default
            entry = shipped.find(dev.key, mode, precision, target, predictor=name)
            if entry is None and name and name != "roofline":
                if shipped.find(dev.key, mode, precision, target):
                    out.notes.append(f"{target}: no shipped {name!r} model for {desc}; "
                                     f"used the default one")
                entry = shipped.find(dev.key, mode, precision, target)
            if entry is not None and entry.get("memsim") and memsim() is None:
                alt = [e for e in shipped.manifest() if not e.get("memsim") and
                       (e["device"], e["mode"], e["precision"]) == (dev.key, mode, precision)
                       and target in e["targets"]]
                entry = alt[0] if alt else None
            if entry is not None and name != "roofline":
                pred = shipped.load_entry(entry)
                value = run(pred, bool(entry.get("memsim")), target)
                out.predictor[target] = pred.name
                out.trained_on[target] = pred.trained_on_
            elif target == "time_ms":
                from perfcast.predictors import create_predictor

                rf = create_predictor("roofline")
                fs = one_record(False)
                rf.fit(fs, targets=["time_ms"])
                value = run(rf, False, target)
                out.predictor[target] = "roofline"
                if name != "roofline":
                    out.notes.append(f"time_ms: no labeled data for {desc} — roofline estimate "
                                     f"(Σ max(FLOPs/peak, bytes/bandwidth) + launch overhead; "
                                     f"an optimistic bound, typically far below measured time)")
                if value is None:
                    out.notes.append(f"time_ms: the device registry has no peak FLOP/s or "
                                     f"bandwidth for {dev.key}")
            elif target == "memory_mb":
                value = memsim()
                if value is not None:
                    out.predictor[target] = "simulation"
                    value += gpu_overhead
                    out.notes.append(
                        f"memory_mb: no learned memory model for {desc} — tensor-memory "
                        f"simulation (live tensors)"
                        + (f" + {gpu_overhead:,.0f} MiB runtime overhead (CUDA context, "
                           f"library workspaces, allocator caching; {overhead_src})"
                           if dev.is_gpu else ""))
                else:
                    out.notes.append("memory_mb: no learned memory model for "
                                     f"{desc} and no simulation")
            else:  # energy
                out.notes.append(f"energy_j: no energy measurements for {desc} in the "
                                 f"training data, so no energy model")
        if (target == "memory_mb" and value is not None and dev.is_gpu
                and out.predictor.get(target) != "simulation"):
            # learned GPU memory includes the runtime; the simulated tensors + overhead are a
            # lower bound (held in 91.5 % of 3,802 GPUMemNet runs) that, unlike a tree model,
            # extrapolates to batches beyond the training data
            sim = memsim()
            if sim is not None and sim + gpu_overhead > value:
                value = sim + gpu_overhead
                out.notes.append(f"memory_mb: the learned model's answer was below the simulated "
                                 f"tensors + runtime overhead (a lower bound; the model does not "
                                 f"extrapolate past its training data) — raised to it")
        setattr(out, target, value)
    learned = [t for t, n in out.predictor.items() if n not in ("roofline", "simulation")]
    if learned and user_pred is None:
        from perfcast.frontends import split_spec

        kind = split_spec(model)[0] if isinstance(model, str) else "module"
        if kind not in ("timm", "torchvision"):
            out.notes.append(f"{', '.join(learned)}: the shipped predictors learned from timm / "
                             f"torchvision image models; a {kind} model is outside that domain — "
                             f"treat the value as a rough estimate")
    if out.time_ms:
        out.throughput_samples_per_s = batch_size / out.time_ms * 1e3
    if out.energy_j and out.time_ms:
        out.power_w = out.energy_j / (out.time_ms / 1e3)
    else:
        out.notes.append("power_w: needs an energy prediction")
    return out


def _looks_like_path(text: str) -> bool:
    import os

    return os.sep in text or text.startswith(".") or os.path.isdir(text)
