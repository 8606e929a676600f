"""Plain helpers shared by several test modules (no fixtures here: fixtures live in conftest)."""

from __future__ import annotations

import functools
import signal
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: ONNX default-domain opset of the hand-built test models.
OPSET = 17
F32 = TensorProto.FLOAT


def hf_spec(folder: Path, name: str, config: dict) -> str:
    """``hf:<folder>/<name>.json`` after writing ``config`` there: a local Hugging Face config
    (offline, no hub) that the zoo's ``hf:`` builder reads."""
    import json

    path = Path(folder) / f"{name}.json"
    path.write_text(json.dumps(config))
    return f"hf:{path}"


def ctrl_c_as_usual() -> None:
    """``preexec_fn`` of a child a test interrupts with SIGINT: a job started in the background
    by a non-interactive shell (``cmd &``) inherits an ignored SIGINT, which Python and perfcast
    respect (as ``nohup`` intends) — give the child the normal Ctrl-C behaviour."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def init_tensor(name: str, shape: tuple[int, ...], dtype=np.float32) -> TensorProto:
    """An ONNX initializer ``name`` of ``shape`` (seeded standard-normal values)."""
    rng = np.random.default_rng(0)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(dtype), name)


def save_onnx(graph: onnx.GraphProto, path: Path, opsets: dict[str, int] | None = None,
              **save_kwargs) -> Path:
    """Wrap ``graph`` in a model (opset :data:`OPSET` plus ``opsets``) and save it to ``path``."""
    imports = [helper.make_opsetid("", OPSET)]
    imports += [helper.make_opsetid(d, v) for d, v in (opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=imports, producer_name="perfcast-tests")
    onnx.save_model(model, str(path), **save_kwargs)
    return path


def cnn_graph(batch: str | int = "N") -> onnx.GraphProto:
    """Conv(3->4, 3x3, pad 1, bias), Relu, MaxPool 2, GlobalAveragePool, Flatten, Gemm(4->10)."""
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc", transB=1),
    ]
    return helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", F32, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", F32, [batch, 10])],
        [init_tensor("w", (4, 3, 3, 3)), init_tensor("b", (4,)), init_tensor("fc_w", (10, 4)),
         init_tensor("fc_b", (10,))])


def shown_commands(text: str) -> list[str]:
    """The ``perfcast …`` commands a page shows: lines ``$ perfcast …`` of its console blocks
    (an environment assignment before ``perfcast`` dropped)."""
    import re

    out = []
    for line in text.splitlines():
        m = re.match(r"^\$ (?:[A-Z_]+=\S+ )*(perfcast .*)$", line.strip())
        if m:
            out.append(m.group(1).strip())
    return out


@functools.lru_cache(maxsize=1)
def _cli_command():
    """The CLI's click command tree (typer builds it in ~50 ms; once per session here)."""
    import typer.main

    from perfcast.faces.cli import app

    return typer.main.get_command(app)


def parse_command(line: str) -> None:
    """Parse one ``perfcast …`` command line against the command line's own definition (the
    options, their types, the required ones) without running it; raises what click raises."""
    import shlex

    from perfcast.faces.cli import _fill_optional_values

    argv = _fill_optional_values(shlex.split(line))
    assert argv[0] == "perfcast", line
    cmd, i = _cli_command(), 1
    while i < len(argv) and argv[i] in (getattr(cmd, "commands", None) or {}):
        cmd, i = cmd.commands[argv[i]], i + 1
    assert i > 1, f"no such command: {line}"
    ctx = cmd.make_context(" ".join(argv[:i]), list(argv[i:]), resilient_parsing=False)
    ctx.close()
