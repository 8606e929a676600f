"""A machine's measured roofline: sustained FP32 GFLOP/s and memory bandwidth per thread count
(measured by :func:`perfcast.profiler.micro.measure_machine`; stored inside the predictors
fitted on the machine so that their physics prior travels with them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from perfcast.errors import PerfcastError


@dataclass
class MachineProfile:
    """Measured peaks of one machine. ``gflops[t]`` (GFLOP/s, FP32 GEMM) and ``bandwidth_gbs[t]``
    (GB/s, streaming add) at ``t`` threads (keys are thread counts as strings in JSON)."""

    device: str
    cpu: str
    gflops: dict[int, float] = field(default_factory=dict)
    bandwidth_gbs: dict[int, float] = field(default_factory=dict)
    measured_at: str = ""
    torch_version: str = ""

    def at(self, threads: int | None) -> tuple[float, float]:
        """``(GFLOP/s, GB/s)`` at ``threads``: measured, or scaled from the nearest measured
        count (compute linearly in threads, bandwidth held) when not measured."""
        if not self.gflops:
            raise PerfcastError(f"machine profile of {self.device} has no measurements")
        t = int(threads) if threads is not None else max(self.gflops)
        if t < 1:
            raise PerfcastError(f"threads must be ≥ 1, got {t}")
        if t in self.gflops:
            return self.gflops[t], self.bandwidth_gbs[t]
        near = min(self.gflops, key=lambda k: abs(k - t))
        return self.gflops[near] * t / near, self.bandwidth_gbs[near]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["gflops"] = {str(k): v for k, v in self.gflops.items()}
        d["bandwidth_gbs"] = {str(k): v for k, v in self.bandwidth_gbs.items()}
        return d

    def save(self, path) -> None:
        """Write as JSON (atomically: a temporary file renamed into place)."""
        import json

        from perfcast.paths import write_file_atomically

        write_file_atomically(path, json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path) -> MachineProfile:
        import json
        from pathlib import Path

        p = Path(path)
        if not p.exists():
            raise PerfcastError(f"machine profile not found: {p} (measure one with perfcast "
                                f"calibrate, or perfcast.profiler.micro.measure_machine)")
        try:
            return cls.from_dict(json.loads(p.read_text()))
        except json.JSONDecodeError as exc:
            raise PerfcastError(f"{p}: not a machine profile ({exc})") from None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MachineProfile:
        try:
            return cls(device=str(d["device"]), cpu=str(d.get("cpu", "")),
                       gflops={int(k): float(v) for k, v in d["gflops"].items()},
                       bandwidth_gbs={int(k): float(v) for k, v in d["bandwidth_gbs"].items()},
                       measured_at=str(d.get("measured_at", "")),
                       torch_version=str(d.get("torch_version", "")))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PerfcastError(f"machine profile is malformed ({type(exc).__name__}: {exc})") \
                from None


__all__ = ["MachineProfile"]
