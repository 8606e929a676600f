"""Check that the PyTorch and the ONNX frontends agree on the same model.

For every model below this builds the model on CPU with random weights, exports it with
``torch.onnx.export(model, (x,), path, dynamo=True, opset_version=23)`` (falling back to opset
20, then 18), builds the ONNX graph with ``graph_from_onnx`` and the PyTorch graph the way
``perfcast`` builds it (``build_graph`` on the meta device; for the Hugging Face model
``graph_from_module`` on a meta-device ``AutoModel``), both at batch 1, and runs
:func:`onnx_agreement.compare_graphs` (``benchmarks/onnx_agreement.py``, imported as a sibling).

It prints one row per model (MACs of both, their relative difference, whether every compute-op
group agrees after the documented decompositions, the decompositions used and what is left
unexplained), then the totals and the documented decompositions, and writes
``reports/onnx_agreement.md`` and ``reports/onnx_agreement.json``.

    python benchmarks/check_onnx_agreement.py [--models resnet18,bert] [--out reports/onnx_agreement]

A model whose export or graph build fails is reported with its reason; the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

#: (label, kind, name, extra) — kind is torchvision | timm | hf.
MODELS: list[tuple[str, str, str, dict]] = [
    ("resnet18", "torchvision", "resnet18", {}),
    ("resnet50", "torchvision", "resnet50", {}),
    ("mobilenet_v3_large", "torchvision", "mobilenet_v3_large", {}),
    ("efficientnet_b0", "torchvision", "efficientnet_b0", {}),
    ("densenet121", "torchvision", "densenet121", {}),
    ("vgg11", "torchvision", "vgg11", {}),
    ("convnext_tiny", "torchvision", "convnext_tiny", {}),
    ("vit_b_16", "torchvision", "vit_b_16", {}),
    ("swin_t", "torchvision", "swin_t", {}),
    ("timm:vit_tiny_patch16_224", "timm", "vit_tiny_patch16_224", {}),
    ("timm:deit_tiny_patch16_224", "timm", "deit_tiny_patch16_224", {}),
    ("timm:swin_tiny_patch4_window7_224", "timm", "swin_tiny_patch4_window7_224", {}),
    ("timm:regnety_008", "timm", "regnety_008", {}),
    ("timm:mobilevit_xs", "timm", "mobilevit_xs", {}),
    ("hf:bert-base-uncased (seq 128)", "hf", "bert-base-uncased", {"seq_len": 128}),
]

OPSETS = (23, 20, 18)
REPO = Path(__file__).resolve().parents[1]


class _Timeout(Exception):
    pass


def _alarm(*_):
    raise _Timeout()


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0][:240] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"


def _build(kind: str, name: str, extra: dict, device: str):
    """(model in eval mode, example input) on ``device`` (``cpu`` = real random weights)."""
    import torch

    if kind == "torchvision":
        import torchvision

        with torch.device(device):
            model = torchvision.models.get_model(name, weights=None)
        x = torch.randn(1, 3, 224, 224, device=device)
    elif kind == "timm":
        import timm

        with torch.device(device):
            model = timm.create_model(name, pretrained=False)
        size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
        x = torch.randn(1, *size, device=device)
    elif kind == "hf":
        import transformers

        from perfcast.zoo.hf import HFWrapper, resolve_hf_config

        config, _ = resolve_hf_config(name)
        config.use_cache = False
        for key, value in extra.get("config", {}).items():
            setattr(config, key, value)
        with torch.device(device):
            model = HFWrapper(transformers.AutoModel.from_config(config, attn_implementation="sdpa"))
        x = torch.zeros(1, int(extra.get("seq_len", 128)), dtype=torch.long, device=device)
    else:
        raise ValueError(f"unknown model kind {kind!r}")
    return model.eval(), x


def _export(model, x, path: str) -> tuple[int, list[str]]:
    """Export with the first opset that works; returns (opset, errors of the failed tries)."""
    import torch

    errors = []
    for opset in OPSETS:
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (x,), path, dynamo=True, opset_version=opset)
            return opset, errors
        except _Timeout:
            raise
        except Exception as exc:  # noqa: BLE001 - try the next opset, report at the end
            errors.append(f"opset {opset}: {_one_line(exc)}")
    raise RuntimeError("export failed: " + " | ".join(errors))


def _torch_graph(label: str, kind: str, name: str, extra: dict):
    """The PyTorch graph as perfcast builds it (meta device, batch 1)."""
    from perfcast.frontends import build_graph
    from perfcast.workload import Workload

    if kind in ("torchvision", "timm"):
        return build_graph(Workload.of(f"{kind}:{name}", batch_size=1))
    from perfcast.frontends.torch_frontend import graph_from_module

    model, x = _build(kind, name, extra, "meta")
    return graph_from_module(model, (x,), model_id=label, batch_size=1)


def _work(args: tuple) -> dict:
    (label, kind, name, extra), timeout = args
    import torch

    torch.set_num_threads(1)
    from onnx_agreement import compare_graphs

    from perfcast.frontends.onnx import graph_from_onnx

    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    out: dict = {"model": label, "status": "ok"}
    t0 = time.perf_counter()
    stage = "build"
    try:
        with tempfile.TemporaryDirectory(prefix="perfcast-agree-") as tmp:
            model, x = _build(kind, name, extra, "cpu")
            stage = "export"
            path = os.path.join(tmp, "model.onnx")
            opset, tries = _export(model, x, path)
            out["opset"] = opset
            if tries:
                out["export_fallbacks"] = tries
            out["export_s"] = round(time.perf_counter() - t0, 1)
            del model
            stage = "onnx graph"
            og = graph_from_onnx(path, batch_size=1, model_id=label)
            stage = "torch graph"
            tg = _torch_graph(label, kind, name, extra)
            stage = "compare"
            res = compare_graphs(tg, og, onnx_model=path)
        out.update(res)
        out["model"] = label
    except _Timeout:
        out.update(status="timeout", reason=f"{stage}: not done within {timeout} s")
    except Exception as exc:  # noqa: BLE001 - report every failure with its reason
        out.update(status="fail", reason=f"{stage}: {_one_line(exc)}")
    finally:
        signal.alarm(0)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


# ---------------------------------------------------------------------------------- report


def _explained_cell(r: dict, verbose: bool = True) -> str:
    """Decompositions used (with their count changes when ``verbose``); plumbing not listed."""
    parts = []
    for rule, info in r.get("rules", {}).items():
        deltas = ", ".join(f"{g} {d:+d}" for g, d in info["deltas"].items())
        parts.append(f"{rule} x{info['applied']}" + (f" ({deltas})" if verbose else ""))
    for tag in ("constant_folding", "dead_code_elimination"):
        ds = [f"{d['group']} {d['delta']:+d}" for d in r.get("differences", []) if d["rule"] == tag]
        if ds:
            parts.append(tag + (f" ({', '.join(ds)})" if verbose else ""))
    return ("; " if verbose else ", ").join(parts) or "-"


def _unexplained_cell(r: dict) -> str:
    ds = [f"{d['group']} {d['delta']:+d}" for d in r.get("unexplained", [])]
    if any(d["group"] == "other" for d in r.get("unexplained", [])):
        um = r.get("unmapped_ops", {})
        names = [f"{side} {', '.join(um[side])}" for side in ("torch", "onnx") if um.get(side)]
        if names:
            ds.append(f"(unmapped: {'; '.join(names)})")
    return ", ".join(ds) or "-"


def _rows(results: list[dict], verbose: bool = True) -> list[list[str]]:
    rows = []
    for r in results:
        if r["status"] != "ok":
            rows.append([r["model"], "-", "-", "-", "-", r["status"], "-", r.get("reason", "")])
            continue
        rows.append([
            r["model"], str(r.get("opset", "")), f"{r['torch_macs'] / 1e9:.4f}",
            f"{r['onnx_macs'] / 1e9:.4f}", f"{100 * r['macs_rel_diff']:+.3f}",
            "yes" if r["ops_agree"] else "no", _explained_cell(r, verbose), _unexplained_cell(r)])
    return rows


HEADER = ["model", "opset", "torch GMACs", "ONNX GMACs", "rel diff %", "compute groups agree",
          "explained differences", "unexplained differences"]


def _text_table(rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(HEADER)]
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    lines = [fmt.format(*HEADER), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*r) for r in rows]
    return "\n".join(lines)


def _summary(results: list[dict]) -> dict:
    ok = [r for r in results if r["status"] == "ok"]
    used: list[str] = []
    for r in ok:
        used += [x for x in r.get("explained", []) if x not in used]
    return {
        "models": len(results), "compared": len(ok),
        "failed": [{"model": r["model"], "status": r["status"], "reason": r.get("reason", "")}
                   for r in results if r["status"] != "ok"],
        "macs_within_2pct": sum(1 for r in ok if r["macs_agree"]),
        "ops_agree": sum(1 for r in ok if r["ops_agree"]),
        "decompositions_used": used,
    }


def _markdown(results: list[dict], summary: dict, command: str) -> str:
    from onnx_agreement import DOCUMENTED_DECOMPOSITIONS

    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = ["# PyTorch vs ONNX frontend agreement", "",
             "Same model through `graph_from_module` (PyTorch, meta device) and through "
             "`torch.onnx.export(dynamo=True)` + `graph_from_onnx`, batch 1, random weights. "
             "Op counts are compared per comparison group after the documented decompositions "
             "(`benchmarks/onnx_agreement.py`); MACs must agree within 2 %.", "",
             f"Regenerate: `{command}`", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in _rows(results):
        lines.append("| " + " | ".join(esc(c) for c in row) + " |")
    n = summary["models"]
    lines += ["", f"- {summary['macs_within_2pct']}/{n} models: MACs within 2 %",
              f"- {summary['ops_agree']}/{n} models: op counts agree modulo documented "
              "decompositions"]
    for f in summary["failed"]:
        lines.append(f"- {f['model']}: {f['status']}: {esc(f['reason'])}")
    lines += ["", "## Documented decompositions", ""]
    for name, text in DOCUMENTED_DECOMPOSITIONS.items():
        mark = " (used above)" if name in summary["decompositions_used"] else ""
        lines.append(f"- `{name}`{mark}: {text}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="",
                    help="comma-separated labels (or substrings) to run; default: all")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per model")
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "onnx_agreement")
    a = ap.parse_args()
    wanted = [w.strip() for w in a.models.split(",") if w.strip()]
    models = [m for m in MODELS if not wanted or any(w == m[0] or w in m[0] for w in wanted)]
    if not models:
        print(f"no model matches {a.models!r}; known: {', '.join(m[0] for m in MODELS)}",
              file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    results = []
    ctx = mp.get_context("fork")  # a fresh worker per model: memory goes back after each one
    t0 = time.perf_counter()
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        for r in pool.imap(_work, [(m, a.timeout) for m in models]):
            results.append(r)
            status = ("agree" if r.get("agree") else "DISAGREE") if r["status"] == "ok" \
                else f"{r['status']}: {r.get('reason', '')}"
            print(f"[{len(results)}/{len(models)}] {r['model']}: {status} ({r['seconds']} s)",
                  flush=True)
    summary = _summary(results)
    summary["wall_s"] = round(time.perf_counter() - t0, 1)

    print()
    print(_text_table(_rows(results, verbose=False)))
    print()
    n = summary["models"]
    for r in results:
        if r["status"] == "ok" and r.get("unexplained"):
            print(f"{r['model']}: unexplained {_unexplained_cell(r)}")
    for f in summary["failed"]:
        print(f"{f['model']}: {f['status']}: {f['reason']}")
    print(f"{summary['macs_within_2pct']}/{n} models: MACs within 2 %")
    print(f"{summary['ops_agree']}/{n} models: op counts agree modulo documented decompositions")
    print("documented decompositions used: " + (", ".join(summary["decompositions_used"]) or "none"))

    command = "python benchmarks/check_onnx_agreement.py" + (f" --models {a.models}" if wanted else "")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{a.out}.md").write_text(_markdown(results, summary, command))
    Path(f"{a.out}.json").write_text(json.dumps({"command": command, "summary": summary,
                                                 "results": results}, indent=2, default=str))
    print(f"wrote {a.out}.md and {a.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
