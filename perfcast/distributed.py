"""The optional Ray backend of ``perfcast collect``, ``corpus`` and ``evaluate`` (``--ray
[ADDRESS]``; ``pip install 'perfcast[ray]'``). The local process pool stays the default.

:func:`cluster` joins a running Ray cluster (``auto``: the one ``ray start`` made on this
machine, or ``$RAY_ADDRESS``; ``HOST:PORT`` / ``ray://HOST:PORT``: that one) or, for
:data:`LOCAL`, starts a local one for the duration of the command — on loopback only, with
Ray's usage statistics off, no dashboard and a 512 MiB object store — and stops it afterwards.
A local cluster offers :data:`CPU_PROFILER` once: measuring nodes of a cluster you start
yourself declare it too (``ray start … --resources='{"perfcast_cpu_profiler": 1}'``), so that
one CPU measurement runs per node at a time.

:func:`as_completed` hands back each task's result (or its exception) as soon as it finishes:
the commands write every result to their store or index right then, so a driver killed
midway loses only the tasks still running (a re-run does them; nothing is duplicated).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator
from typing import Any

from perfcast.errors import PerfcastError

#: The ``--ray`` value that starts a local cluster (the option given without an address).
LOCAL = "local"
#: Ray resource of a node that measures on its CPU: one CPU measurement per node at a time.
CPU_PROFILER = "perfcast_cpu_profiler"
#: Object store of a local cluster (bytes): results are small (rows, graphs of ≤ a few MB).
LOCAL_OBJECT_STORE_BYTES = 512 * 2**20

INSTALL_HINT = "pip install 'perfcast[ray]'"


def check_address(address: str | None) -> str | None:
    """``--ray``'s value validated — ``None`` (no Ray), :data:`LOCAL`, ``auto``, ``HOST:PORT``
    or ``ray://HOST:PORT`` — and Ray importable (before any work starts)."""
    if address is None:
        return None
    a = address.strip()
    if not (a in (LOCAL, "auto") or a.startswith("ray://")):
        host, sep, port = a.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise PerfcastError(f"--ray takes no value (start a local cluster), auto, "
                                f"HOST:PORT or ray://HOST:PORT, got {address!r}")
    if a == LOCAL:  # read when Ray is imported: a single-node cluster on loopback
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    _import_ray()
    return a


def _import_ray():
    try:
        import ray
    except ImportError:
        raise PerfcastError(f"--ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


@contextlib.contextmanager
def cluster(address: str, *, num_cpus: int | None = None,
            resources: dict[str, float] | None = None) -> Iterator[Any]:
    """The ``ray`` module, connected to the cluster of ``address`` (see the module docstring)
    for the ``with`` block. ``num_cpus`` / ``resources``: of a local cluster (default: this
    machine's CPUs; :data:`CPU_PROFILER` = 1 always). A driver already connected (``ray.init``
    by the caller, e.g. a test session) is used as it is and left connected."""
    address = check_address(address)
    ray = _import_ray()
    _ray_messages_to_stderr()
    if ray.is_initialized():
        yield ray
        return
    quiet = logging.getLogger("ray")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # Ray's start-up chatter is not perfcast's output
    try:
        if address == LOCAL:
            ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1,
                     resources={**(resources or {}), CPU_PROFILER: 1},
                     include_dashboard=False, log_to_driver=False, configure_logging=False,
                     object_store_memory=LOCAL_OBJECT_STORE_BYTES)
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # noqa: BLE001 - no cluster there, version mismatch, …
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        where = "start a local Ray cluster" if address == LOCAL else \
            f"connect to the Ray cluster at {address}"
        raise PerfcastError(f"cannot {where}: {first}") from None
    finally:
        quiet.setLevel(level)
    try:
        yield ray
    finally:
        ray.shutdown()


def _ray_messages_to_stderr() -> None:
    """Ray prints the cluster's error messages (``(raylet) A worker died …``) to the driver's
    standard output, where they would break ``--json`` and mix with the results: send them to
    standard error (the failure itself is recorded with its reason). Ray's internal printer,
    wrapped once; a Ray without it is left as it is."""
    try:
        from ray._private import worker as ray_worker
    except ImportError:
        return
    orig = getattr(ray_worker, "print_to_stdstream", None)
    if orig is None or getattr(orig, "_perfcast_stderr", False):
        return

    def to_stderr(data, *args, **kwargs):
        if isinstance(data, dict):
            data = {**data, "is_err": True}
        return orig(data, *args, **kwargs)

    to_stderr._perfcast_stderr = True
    ray_worker.print_to_stdstream = to_stderr


def require_resource(ray, name: str, what: str) -> float:
    """The cluster's total of resource ``name``; an error naming ``what`` needs it when none."""
    total = float(ray.cluster_resources().get(name, 0))
    if total <= 0:
        hint = (f"start measuring nodes with ray start --resources='{{\"{name}\": 1}}'"
                if name == CPU_PROFILER else f"no node offers {name}")
        raise PerfcastError(f"the Ray cluster has no {name} resource, which {what} needs: "
                            f"{hint}")
    return total


def as_completed(ray, refs: Iterable[Any]) -> Iterator[tuple[Any, Any, BaseException | None]]:
    """``(ref, result, None)`` or ``(ref, None, exception)`` for each task of ``refs`` as it
    finishes (any order). A task's failure (its exception, a worker that died) is returned,
    not raised; an interrupt of the driver cancels the tasks still running."""
    pending = list(refs)
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            ref = done[0]
            try:
                yield ref, ray.get(ref), None
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - the task's failure, reported to the caller
                yield ref, None, exc
    finally:
        for ref in pending:  # interrupted (or the caller stopped early): cancel the rest
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)


def failure_reason(exc: BaseException) -> str:
    """One line for a failed Ray task: ``ray task failed: <cause type>: <first line>``."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    # a RayTaskError's text starts with the remote traceback header: take its last line
    line = (text[-1] if len(text) > 1 and "Traceback" in str(cause) else
            text[0] if text else "")
    return f"ray task failed: {type(cause).__name__}: {line[:250]}"


__all__ = ["CPU_PROFILER", "INSTALL_HINT", "LOCAL", "as_completed", "check_address", "cluster",
           "failure_reason", "require_resource"]
