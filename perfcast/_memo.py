"""A bounded in-process memo: the warm caches of answers (composed kernel sums, anchored
predictors, LLM decode envelopes) that ``perfcast serve`` reads from several threads at once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class Memo:
    """A mapping bounded to ``size`` entries, the oldest dropped first; every operation holds
    one lock, so the threads of a server can share it (a plain dict evicting with
    ``pop(next(iter(d)))`` can fail when another thread changes it in between)."""

    def __init__(self, size: int) -> None:
        self._data: OrderedDict = OrderedDict()
        self._size = int(size)
        self._lock = threading.Lock()

    def get(self, key, default: Any = None) -> Any:
        with self._lock:
            return self._data.get(key, default)

    def get_all(self, keys) -> list | None:
        """The values of every key of ``keys``, or ``None`` when one is missing."""
        with self._lock:
            if all(k in self._data for k in keys):
                return [self._data[k] for k in keys]
            return None

    def put(self, key, value) -> None:
        self.put_all([(key, value)])

    def put_all(self, items) -> None:
        with self._lock:
            for k, v in items:
                self._data[k] = v
            while len(self._data) > self._size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._data


__all__ = ["Memo"]
