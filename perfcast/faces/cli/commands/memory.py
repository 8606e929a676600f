"""``perfcast memory``: the exact simulated tensor-memory peak of a step."""

from __future__ import annotations

import typer
from rich.table import Table

from perfcast.faces.cli._common import PANEL_PREDICT, examples, out, print_json
from perfcast.faces.cli.options import JSON, command

app = typer.Typer()


@app.command(rich_help_panel=PANEL_PREDICT, epilog=examples(
    "perfcast memory timm:resnet50 --mode train --batch-size 32 --optimizer adamw",
    "perfcast memory hf:gpt2 --mode infer --batch-size 8 --seq-len 512 --precision fp16 --json"))
@command("memory", own=[JSON])
def memory(values: dict, *, as_json: bool = False):
    """Simulate the exact tensor-memory peak of a step (MiB).

    The peak of live tensor bytes of a training step or an inference pass, simulated under
    FakeTensor — no device, no weights. Excludes the CUDA context, the allocator and library
    workspaces (perfcast predict adds them on GPUs)."""
    from perfcast.decisions.answer import request
    from perfcast.memory import simulate_memory

    w = request("memory", values).workload
    if w.mode == "generate":
        from perfcast.errors import PerfcastError

        raise PerfcastError("perfcast memory simulates a step's tensors (--mode infer or "
                            "train); --mode generate's memory is perfcast predict's")
    d = simulate_memory(w.model.text, batch_size=w.batch_size or 1, input_size=w.input_size,
                        seq_len=w.seq_len, mode=w.mode, precision=w.precision or "fp32",
                        optimizer=w.optimizer).to_dict()
    if as_json:
        print_json(d)
        return
    t = Table(title=f"{d['model']}  ({d['mode']}, {d['precision']}, batch {d['batch_size']})",
              show_header=False)
    t.add_row("tensor peak", f"{d['tensor_peak_mb']:,.1f} MiB")
    for k in ("param_mb", "grad_mb", "optimizer_state_mb", "activation_peak_mb"):
        if d.get(k) is not None:
            t.add_row(k.removesuffix("_mb").replace("_", " "), f"{d[k]:,.1f} MiB")
    for note in d.get("notes") or []:
        t.add_row("note", str(note))
    out.print(t)


__all__ = ["app", "memory"]
