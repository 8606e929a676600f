"""perfcast._memo.Memo: bounded, oldest first, shared by threads."""

from __future__ import annotations

import threading

from perfcast._memo import Memo


def test_bounded_oldest_dropped_first():
    m = Memo(3)
    m.put_all((k, k * k) for k in range(5))
    assert len(m) == 3 and 0 not in m and 1 not in m
    assert m.get(4) == 16 and m.get(0, "gone") == "gone"
    assert m.get_all([2, 3, 4]) == [4, 9, 16] and m.get_all([1, 2]) is None
    m.clear()
    assert len(m) == 0


def test_many_threads_filling_and_reading_at_once():
    m, errors = Memo(50), []

    def work(t):
        try:
            for i in range(2000):
                m.put((t, i), i)
                m.get((t, i - 1))
                m.get_all([(t, i)])
        except Exception as exc:  # noqa: BLE001 - what the test looks for
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(m) == 50
