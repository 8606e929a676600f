"""The hostile and careless inputs of issue #23, one :class:`Case` each: what the user does, the
command line, and what must happen. ``tests/test_reliability.py`` runs every case and asserts
it; ``benchmarks/reliability_report.py`` runs them through the real console script and writes
``reports/reliability.md`` (today's outcome of each).

A case's ``setup(tmp)`` prepares files in a fresh temporary folder and returns the arguments of
``perfcast``; ``check(rc, out, err, tmp)`` returns ``None`` when the outcome is right, else
what is wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass(frozen=True)
class Case:
    id: str
    does: str  # what the user does
    expect: str  # what should happen
    setup: Callable[[Path], list[str]]
    check: Callable[[int, str, str, Path], str | None]
    cwd: str | None = None  # run in this sub-folder of the temporary folder


# --------------------------------------------------------------------------- checks
def one_line_error(rc_expected: int = 2, *needles: str):
    """Exit ``rc_expected``, stderr one line starting ``error:`` containing ``needles``."""

    def check(rc: int, out: str, err: str, tmp: Path) -> str | None:
        lines = [x for x in err.strip().splitlines() if x.strip()]
        if rc != rc_expected:
            return f"exit {rc}, expected {rc_expected}: {err.strip()[:200]}"
        if "Traceback" in err:
            return "a traceback on stderr"
        if len(lines) != 1 or not lines[0].startswith("error:"):
            return f"not a one-line error: {err.strip()[:300]!r}"
        missing = [n for n in needles if n.lower() not in lines[0].lower()]
        return f"message lacks {missing}: {lines[0]}" if missing else None

    return check


def strict_json(text: str):
    """``json.loads`` that refuses ``NaN`` / ``Infinity`` (RFC 8259)."""

    def refuse(const: str):
        raise ValueError(f"non-standard JSON constant {const}")

    return json.loads(text, parse_constant=refuse)


# --------------------------------------------------------------------------- setups
def _conv_onnx(path: Path, shape) -> Path:
    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _damaged_cache(damage: str):
    """Build the graph once (cache filled), then damage the cache entry."""

    def setup(tmp: Path) -> list[str]:
        from perfcast.cache import cache_path, get_graph
        from perfcast.workload import Workload

        w = Workload.of("torchvision:squeezenet1_1", batch_size=1)
        get_graph(w)
        p = cache_path(w)
        raw = p.read_bytes()
        p.write_bytes({"truncate": raw[: len(raw) // 2], "empty": b"",
                       "garbage": os.urandom(len(raw))}[damage])
        return ["inspect", "torchvision:squeezenet1_1", "-b", "1", "--json"]

    return setup


def _healed(rc: int, out: str, err: str, tmp: Path) -> str | None:
    if rc != 0:
        return f"exit {rc}: {err.strip()[:200]}"
    notes = [x for x in err.splitlines() if x.startswith("note:")]
    if len(notes) != 1 or "rebuilt" not in notes[0]:
        return f"expected one 'note: … rebuilt' line, got {err.strip()[:300]!r}"
    return None if strict_json(out)["nodes"] > 0 else "empty graph"


def _saved_into_dir(rc: int, out: str, err: str, tmp: Path) -> str | None:
    if rc != 0:
        return f"exit {rc}: {err.strip()[:200]}"
    files = sorted(p.name for p in (tmp / "out").iterdir())
    return None if files == ["torchvision-squeezenet1_1_infer_fp32.npz"] else f"wrote {files}"


def _strict_null_cost(rc: int, out: str, err: str, tmp: Path) -> str | None:
    if rc != 0:
        return f"exit {rc}: {err.strip()[:200]}"
    d = strict_json(out)
    if d["hours"] is not None or not any("not a finite number" in n for n in d["notes"]):
        return f"hours {d['hours']!r}, notes {d['notes']}"
    return None


def _bound_onnx(rc: int, out: str, err: str, tmp: Path) -> str | None:
    if rc != 0:
        return f"exit {rc}: {err.strip()[:200]}"
    d = strict_json(out)
    return None if d["flops"] > 0 and d["input_shapes"] == [[1, 3, 32, 32]] else str(d)


def _nothing_in_cwd(rc: int, out: str, err: str, tmp: Path) -> str | None:
    if rc != 0:
        return f"exit {rc}: {err.strip()[:200]}"
    left = sorted(p.name for p in (tmp / "cwd").iterdir())
    return None if not left else f"written in the working directory: {left}"


def _dev_spec(tmp: Path) -> list[str]:
    spec = {"key": "typo-gpu", "name": "Typo GPU", "kind": "gpu", "peak_fp32_tflops": 20,
            "memory_gb": 24, "bandwith_gbs": 900}
    (tmp / "gpu.json").write_text(json.dumps(spec))
    return ["predict", "torchvision:squeezenet1_1", "--device", str(tmp / "gpu.json")]


def _sweep_spec(tmp: Path) -> list[str]:
    (tmp / "sweep.yaml").write_text("device: cpu\nsweeps:\n- models: [torchvision:squeezenet1_1]"
                                    "\n  batch_size: [1, 2]\n")
    return ["collect", "--spec", str(tmp / "sweep.yaml"), "--db", str(tmp / "m.db")]


def _mkdir(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir(exist_ok=True)
    return tmp / name


CASES: list[Case] = [
    Case("cache-truncated", "a graph-cache .npz is truncated (disk full, killed mid-write)",
         "entry deleted, rebuilt, one-line note; exit 0", _damaged_cache("truncate"), _healed),
    Case("cache-empty", "the same entry is empty", "same as above", _damaged_cache("empty"),
         _healed),
    Case("cache-overwritten", "the same entry is overwritten with other bytes", "same as above",
         _damaged_cache("garbage"), _healed),
    Case("huge-batch", "--batch-size 100000000000000000000000", "exit 2 naming the limit",
         lambda tmp: ["predict", "timm:resnet18", "--device", "rtx4090", "--batch-size",
                      "100000000000000000000000"],
         one_line_error(2, "--batch-size", "2,147,483,647")),
    Case("huge-batch-json", "the same with --json", "exit 2 naming the limit",
         lambda tmp: ["predict", "timm:resnet18", "--device", "rtx4090", "--batch-size",
                      "100000000000000000000000", "--json"],
         one_line_error(2, "--batch-size", "2,147,483,647")),
    Case("predictor-typo", "--predictor dipm (typo)", "exit 2 with the valid names",
         lambda tmp: ["predict", "timm:resnet18", "--device", "rtx4090", "--predictor", "dipm"],
         one_line_error(2, "unknown predictor", "did you mean 'dippm'")),
    Case("optimizer-typo", "--mode train --optimizer adamm", "exit 2",
         lambda tmp: ["predict", "timm:resnet18", "--device", "rtx4090", "--mode", "train",
                      "--optimizer", "adamm"],
         one_line_error(2, "unknown optimizer 'adamm'", "did you mean 'adam'", "sgd-momentum")),
    Case("plot-missing-dir", "rank … --plot /missing/dir/x.png",
         "exit 2 before any work is done",
         lambda tmp: ["rank", "torchvision:squeezenet1_1", "--devices", "rtx4090,a100-40gb",
                      "--plot", str(tmp / "missing" / "dir" / "x.png")],
         one_line_error(2, "--plot", "does not exist")),
    Case("save-into-dir", "inspect … --save SOME_EXISTING_DIR", "write <dir>/<name>.npz",
         lambda tmp: ["inspect", "torchvision:squeezenet1_1", "--save", str(_mkdir(tmp, "out"))],
         _saved_into_dir),
    Case("negative-seq-len", "hf:gpt2 --seq-len -5",
         "only the one line (no traceback from a forked child)",
         lambda tmp: ["predict", "hf:gpt2", "--device", "a100-40gb", "--seq-len", "-5"],
         one_line_error(2, "sequence length")),
    Case("spec-json-typo", "a device spec JSON with a misspelt key",
         "exit 2 naming the key, with the nearest valid one", _dev_spec,
         one_line_error(2, "bandwith_gbs", "did you mean bandwidth_gbs")),
    Case("spec-yaml-typo", "a sweep YAML with a misspelt key (batch_size)",
         "exit 2 naming the key, with the nearest valid one", _sweep_spec,
         one_line_error(2, "unknown key(s) batch_size", "did you mean batch_sizes")),
    Case("onnx-symbolic-chw", "an ONNX model with symbolic C, H, W",
         "exit 2 asking for --input-size",
         lambda tmp: ["inspect", str(_conv_onnx(tmp / "sym.onnx", ["N", "C", "H", "W"]))],
         one_line_error(2, "symbolic input dimensions", "--input-size")),
    Case("onnx-symbolic-bound", "the same with --input-size 3,32,32", "--input-size binds them",
         lambda tmp: ["inspect", str(_conv_onnx(tmp / "sym.onnx", ["N", "C", "H", "W"])),
                      "--input-size", "3,32,32", "--json"],
         _bound_onnx),
    Case("onnx-fixed-input-size", "--input-size on an ONNX model with fixed inputs", "exit 2",
         lambda tmp: ["inspect", str(_conv_onnx(tmp / "fixed.onnx", [1, 3, 32, 32])),
                      "--input-size", "3,64,64"],
         one_line_error(2, "fixed shapes", "--input-size does not apply")),
    Case("onnx-fixed-seq-len", "--seq-len on an ONNX model with fixed inputs", "exit 2",
         lambda tmp: ["inspect", str(_conv_onnx(tmp / "fixed.onnx", [1, 3, 32, 32])),
                      "--seq-len", "16"],
         one_line_error(2, "fixed shapes", "--seq-len does not apply")),
    Case("cost-unbounded", "cost of a job whose time overflows",
         "strict JSON everywhere (null + a note)",
         lambda tmp: ["cost", "--time-ms", "1e308", "--device", "a100-40gb", "--iterations",
                      "10000000000", "--json"],
         _strict_null_cost),
    Case("memsim-in-cwd", "a training prediction needing the memory simulation",
         "nothing written in the working directory (memsim.csv under the cache directory)",
         lambda tmp: (_mkdir(tmp, "cwd"), ["predict", "torchvision:squeezenet1_1", "--device",
                                             "h100-sxm", "--mode", "train", "-b", "2"])[1],
         _nothing_in_cwd, cwd="cwd"),
]
