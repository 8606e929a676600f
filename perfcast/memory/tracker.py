"""Live tensor-memory tracking: the peak of bytes held by live tensor storages.

:class:`LiveTensorTracker` is a :class:`~torch.utils._python_dispatch.TorchDispatchMode`. Every
ATen op that reaches the Python dispatch key (that is, every op after autograd and autocast, the
same ops the CUDA caching allocator would be asked to allocate for) is run, and each tensor it
returns is charged by its *untyped storage*: a storage is counted once however many views share
it, it is counted when it first appears and released when it is garbage collected (a weak
reference on the storage object; PyTorch keeps one Python object per live storage, so the
callback fires exactly when the storage dies). The tracker keeps the current and peak live bytes,
the peak per phase (``"forward"``, ``"backward"``, ``"optimizer"`` … whatever the caller sets
with :meth:`LiveTensorTracker.phase`), and the live bytes per category at the peak.

It works the same on real tensors and under ``FakeTensorMode`` (enter the fake mode first, then
the tracker; fake storages live on ``meta`` but have the right ``nbytes`` and identity). This is
the mechanism of ``torch.distributed._tools.mem_tracker.MemTracker`` without its module hooks and
per-peak snapshot copies, which keeps the per-op overhead at a few microseconds.

Pre-existing tensors (parameters, buffers, inputs, optimizer state) are not produced by an op
under the tracker; register them with :meth:`LiveTensorTracker.register` (tensors, modules,
optimizers or containers of them) or :meth:`LiveTensorTracker.register_live_tensors` (every live
tensor that Python's garbage collector can find).

What the tracker cannot see (on real CPU runs, :func:`measure_peak_tensor_bytes`):

* memory a kernel allocates internally and frees before it returns — oneDNN/MKL scratch pads,
  the im2col buffer of a slow convolution, sort/top-k workspaces, reduction buffers: those
  allocations never surface as an op output;
* storages resized in place with ``UntypedStorage.resize_`` (not an op; FSDP-style code) — an op
  that resizes one of its outputs (``out=`` variants) is seen, because every output's size is
  re-read;
* tensors without a storage (mkldnn opaque tensors, sparse, nested) and non-tensor memory (the
  Python heap, the allocator's caches, thread pools).

Counts are exact bytes of storages (``nbytes``), with no allocator rounding.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["LiveTensorTracker", "measure_peak_tensor_bytes"]

MiB = float(2**20)


class LiveTensorTracker(TorchDispatchMode):
    """Track live tensor-storage bytes of the ops dispatched while the mode is active.

    Example::

        tracker = LiveTensorTracker()
        tracker.register(model, category="param")
        with tracker:
            with tracker.phase("forward"):
                loss = model(x).mean()
            with tracker.phase("backward"):
                loss.backward()
        tracker.peak_bytes, tracker.phase_peaks

    ``device_type``: count only storages on this device type (``"cpu"`` counts real CPU
    storages; fake tensors' storages are on ``meta``: use ``"meta"``; ``None`` counts all).
    ``record_timeline``: also keep ``timeline``, the live bytes and phase after every op
    (``(bytes, phase)`` per dispatched op, in order: the memory timeline of the pass).
    """

    def __init__(self, device_type: str | None = None, record_timeline: bool = False):
        super().__init__()
        self.device_type = device_type
        self.timeline: list[tuple[int, str | None]] | None = [] if record_timeline else None
        self.current_bytes = 0
        self.peak_bytes = 0
        self.phase_peaks: dict[str, int] = {}
        self.peak_phase: str | None = None
        #: live bytes per category at the (first) moment the peak was reached
        self.peak_breakdown: dict[str, int] = {}
        self.n_ops = 0
        self.n_storages = 0
        self._phase: str | None = None
        # id(storage) -> [nbytes, category, weakref]
        self._live: dict[int, list] = {}
        self._cat_bytes: dict[str, int] = {}

    # ------------------------------------------------------------------ bookkeeping
    def _category(self) -> str:
        return self._phase or "other"

    def _add_storage(self, st: torch.UntypedStorage, category: str) -> None:
        key = id(st)
        entry = self._live.get(key)
        if entry is not None:
            n = st.nbytes()
            if n != entry[0]:  # resized by an out= op
                delta = n - entry[0]
                entry[0] = n
                self.current_bytes += delta
                self._cat_bytes[entry[1]] = self._cat_bytes.get(entry[1], 0) + delta
            return
        if self.device_type is not None and st.device.type != self.device_type:
            return
        n = st.nbytes()
        ref = weakref.ref(st, self._release_callback(key))
        self._live[key] = [n, category, ref]
        self.n_storages += 1
        self.current_bytes += n
        self._cat_bytes[category] = self._cat_bytes.get(category, 0) + n

    def _release_callback(self, key: int) -> Callable[[Any], None]:
        def release(_ref: Any, key: int = key, tracker_ref=weakref.ref(self)) -> None:
            tracker = tracker_ref()
            if tracker is None:
                return
            entry = tracker._live.pop(key, None)
            if entry is not None:
                tracker.current_bytes -= entry[0]
                tracker._cat_bytes[entry[1]] -= entry[0]
        return release

    def _add_tensor(self, t: torch.Tensor, category: str) -> None:
        try:
            st = t.untyped_storage()
        except (RuntimeError, NotImplementedError, TypeError):  # sparse, mkldnn, nested ...
            return
        self._add_storage(st, category)

    def _update_peak(self) -> None:
        cur = self.current_bytes
        if cur > self.peak_bytes:
            self.peak_bytes = cur
            self.peak_phase = self._phase
            self.peak_breakdown = dict(self._cat_bytes)
        ph = self._phase
        if ph is not None and cur > self.phase_peaks.get(ph, -1):
            self.phase_peaks[ph] = cur

    # ------------------------------------------------------------------ public API
    def register(self, obj: Any, category: str = "existing") -> int:
        """Count the storages of ``obj`` as live now; return the bytes newly counted.

        ``obj`` may be a tensor, an ``nn.Module`` (parameters, their gradients and buffers), a
        ``torch.optim.Optimizer`` (its state) or a list/tuple/dict of those.
        """
        before = self.current_bytes
        for t, cat in _iter_tensors(obj, category):
            self._add_tensor(t, cat)
        self._update_peak()
        return self.current_bytes - before

    def register_live_tensors(self, category: str = "existing") -> int:
        """Count every live tensor the garbage collector can find (of ``device_type``)."""
        before = self.current_bytes
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for o in gc.get_objects():
                if issubclass(type(o), torch.Tensor):
                    self._add_tensor(o, category)
        self._update_peak()
        return self.current_bytes - before

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Attribute the ops run inside to phase ``name`` (peaks per phase)."""
        old = self._phase
        self._phase = name
        if self.current_bytes > self.phase_peaks.get(name, -1):
            self.phase_peaks[name] = self.current_bytes
        try:
            yield
        finally:
            self._phase = old

    def reset_peak(self) -> None:
        """Start a new peak from the current live bytes (like ``reset_peak_memory_stats``)."""
        self.peak_bytes = self.current_bytes
        self.peak_phase = self._phase
        self.peak_breakdown = dict(self._cat_bytes)
        self.phase_peaks = {}

    @property
    def live_bytes_by_category(self) -> dict[str, int]:
        return {k: v for k, v in self._cat_bytes.items() if v}

    def is_tracked(self, t: torch.Tensor) -> bool:
        try:
            return id(t.untyped_storage()) in self._live
        except (RuntimeError, NotImplementedError, TypeError):
            return False

    # ------------------------------------------------------------------ dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.n_ops += 1
        cat = self._phase or "other"
        if isinstance(out, torch.Tensor):
            self._add_tensor(out, cat)
        elif isinstance(out, (tuple, list)):
            for o in out:
                if isinstance(o, torch.Tensor):
                    self._add_tensor(o, cat)
                elif isinstance(o, (tuple, list)):
                    for p in o:
                        if isinstance(p, torch.Tensor):
                            self._add_tensor(p, cat)
        self._update_peak()
        if self.timeline is not None:
            self.timeline.append((self.current_bytes, self._phase))
        return out


def _iter_tensors(obj: Any, category: str) -> Iterator[tuple[torch.Tensor, str]]:
    from torch import nn

    if isinstance(obj, torch.Tensor):
        yield obj, category
        if obj.is_leaf and obj.requires_grad and obj.grad is not None:
            yield obj.grad, "grad"
    elif isinstance(obj, nn.Module):
        for p in obj.parameters():
            yield p, "param"
            if p.grad is not None:
                yield p.grad, "grad"
        for b in obj.buffers():
            yield b, "buffer"
    elif isinstance(obj, torch.optim.Optimizer):
        for state in obj.state.values():
            for v in state.values():
                if isinstance(v, torch.Tensor):
                    yield v, "optimizer_state"
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _iter_tensors(v, category)
    elif isinstance(obj, (list, tuple, set)):
        for v in obj:
            yield from _iter_tensors(v, category)


def measure_peak_tensor_bytes(fn: Callable[..., Any], *args: Any, include_existing: bool = True,
                              **kwargs: Any) -> int:
    """Run ``fn(*args, **kwargs)`` on real CPU tensors and return its peak live tensor bytes.

    The peak counts, like ``torch.cuda.max_memory_allocated`` after a reset, every CPU tensor
    storage alive at that moment: with ``include_existing=True`` (default) all CPU tensors alive
    when ``fn`` starts (found through the garbage collector: parameters, buffers, gradients,
    optimizer state, inputs held by closures) plus tensors in ``args``; then every storage the
    ops inside ``fn`` create, until it is freed. ``include_existing=False`` counts only ``args``
    and what ``fn`` allocates.

    Not seen (see the module docstring): kernel-internal scratch memory (oneDNN/MKL workspaces,
    im2col buffers), ``UntypedStorage.resize_`` and tensors without a storage, and allocator
    effects (the CPU allocator does not round or cache the way the CUDA caching allocator does).
    """
    tracker = LiveTensorTracker(device_type="cpu")
    if include_existing:
        gc.collect()
        tracker.register_live_tensors()
    tracker.register(list(args), "input")
    tracker.register(dict(kwargs), "input")
    with tracker:
        fn(*args, **kwargs)
    return int(tracker.peak_bytes)
