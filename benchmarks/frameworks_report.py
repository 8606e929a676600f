"""Framework independence, measured (issue #20): the same architecture from TensorFlow / Keras,
PaddlePaddle and JAX / Flax — each through its ONNX exporter and perfcast's exporter frontend
(:mod:`perfcast.frontends.exported`) — and from PyTorch (perfcast's PyTorch frontend) must give
total MACs within 2 % and op counts that agree modulo documented decompositions.

Architectures (batch 1, random weights, nothing downloaded):

* **ResNet-50** — PyTorch: ``torchvision:resnet50`` (v1.5: stride on the 3×3 convolution);
  ``keras:ResNet50`` is ResNet-50 **v1** (stride on the first 1×1 convolution; its convolutions
  also have biases), so Keras is compared with torchvision's ResNet-50 rebuilt as v1
  (:func:`framework_models.torch_resnet50_v1`) and its MACs against v1.5 are reported beside;
  ``paddle:resnet50``; JAX: :func:`framework_models.flax_resnet50` (Flax NNX, no zoo).
* **MobileNetV2** — ``torchvision:mobilenet_v2``, ``keras:MobileNetV2``,
  ``paddle:mobilenet_v2``, :func:`framework_models.flax_mobilenet_v2`.
* **BERT-base encoder** (bert-base-uncased sizes, sequence 128, ``BertModel``: embeddings,
  12 layers, pooler) — PyTorch: Hugging Face ``AutoModel`` from perfcast's shipped config (as
  ``benchmarks/check_onnx_agreement.py``); no framework here ships one without a download, so
  each is written with the framework's own layers in ``benchmarks/framework_models.py``
  (Keras ``MultiHeadAttention``, ``paddle.nn.TransformerEncoder``, Flax NNX
  ``MultiHeadAttention``).

Op counts are compared with :func:`onnx_agreement.compare_graphs` (``benchmarks/
onnx_agreement.py``: comparison groups, plumbing not compared, constant folding and dead code
set aside), with the exporters' own decompositions added in front of its rules
(:data:`FRAMEWORK_RULES`, each documented by the first line of its docstring).

    python benchmarks/frameworks_report.py [--models resnet50,mobilenet_v2,bert]
        [--frameworks tensorflow,paddle,jax] [--out reports/frameworks]

writes ``reports/frameworks.md`` and ``reports/frameworks.json``. A framework whose extra is
not installed is reported as skipped, a failed export with its reason; the rest go on.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import framework_models as fm  # noqa: E402
import onnx_agreement as oa  # noqa: E402

#: Architectures in the report order: (key, label).
MODELS = (("resnet50", "ResNet-50"), ("mobilenet_v2", "MobileNetV2"),
          ("bert", "BERT-base encoder (seq 128)"))
#: Frameworks in the report order: (key, label, modules the extra installs).
FRAMEWORKS = (("tensorflow", "TensorFlow / Keras (tf2onnx)", ("tensorflow", "keras", "tf2onnx")),
              ("paddle", "PaddlePaddle (paddle2onnx)", ("paddle", "paddle2onnx")),
              ("jax", "JAX / Flax (jax2onnx)", ("jax", "flax", "jax2onnx")))
SEQ_LEN = 128


# ---------------------------------------------------------------------------------- rules


def _excess(st, group: str) -> int:
    return st.excess(group)


def _rule(name: str):
    """Register a framework rule in front of ``onnx_agreement.RULES`` (documented the same way:
    the first line of its docstring)."""
    def deco(fn):
        doc = (fn.__doc__ or name).strip().splitlines()[0].strip()
        FRAMEWORK_RULES.append(oa.Rule(name, doc, fn))
        return fn
    return deco


#: The exporters' decompositions, tried before ``onnx_agreement``'s own rules.
FRAMEWORK_RULES: list = []


def _bundle(st, n_max: int, bundle: dict[str, int]) -> int:
    """How many instances of ``bundle`` (group → count per instance) the excesses allow."""
    n = n_max
    for g, k in bundle.items():
        if k > 0:
            n = min(n, max(0, _excess(st, g)) // k)
    return max(0, n)


@_rule("classifier_softmax")
def _classifier_softmax(st):
    """Architecture, not a decomposition: keras.applications classifiers end with a Softmax (classifier_activation='softmax'); torchvision's return logits."""
    t = st.torch
    if t.nodes_of("softmax", "log_softmax") or not t.nodes_of("conv2d", "conv_depthwise"):
        return 0, 0, {}
    n = min(1, max(0, _excess(st, "softmax")))
    return n, 1, {"softmax": n}


@_rule("batchnorm_as_mul_add")
def _bn_mul_add(st):
    """tf2onnx: an inference BatchNorm it does not fold into the convolution before it becomes Mul + Add (per-channel scale and shift; here every BN of Keras ResNet-50, whose convolutions have biases, and the 17 after MobileNetV2's depthwise convolutions)."""
    cands = len(st.torch.nodes_of("batch_norm"))
    n = min(cands, max(0, -_excess(st, "batch_norm")))
    n = _bundle(st, n, {"mul": 1, "add": 1})
    return n, cands, {"batch_norm": -n, "mul": n, "add": n}


@_rule("relu6_as_max_min")
def _relu6(st):
    """jax2onnx: ReLU6 (nnx.relu6, a clip to [0, 6]) is exported as Max + Min."""
    cands = len(st.torch.nodes_of("relu6", "hardtanh"))
    n = min(cands, max(0, -_excess(st, "relu_clip")))
    n = _bundle(st, n, {"maximum": 1, "minimum": 1})
    return n, cands, {"relu_clip": -n, "maximum": n, "minimum": n}


@_rule("attention_scaled_once")
def _attention(st):
    """Attention exported as 2 MatMul + Softmax + 1 Mul: the 1/sqrt(d) scale is applied once (to the query or to the scores; torch.onnx scales query and key)."""
    cands = len(st.torch.nodes_of("sdpa"))
    n = min(cands, max(0, -_excess(st, "attention")))
    n = _bundle(st, n, {"dense": 2, "softmax": 1, "mul": 1})
    return n, cands, {"attention": -n, "dense": 2 * n, "softmax": n, "mul": n}


@_rule("layer_norm_decomposed_tf2onnx")
def _ln_tf(st):
    """tf2onnx: Keras LayerNormalization is decomposed: 2 GlobalAveragePool (mean, variance) + Neg + Sub + 4 Mul + 3 Add + Sqrt + Reciprocal."""
    bundle = {"adaptive_avg_pool": 2, "neg": 1, "sub": 1, "mul": 4, "add": 3, "sqrt": 1,
              "reciprocal": 1}
    cands = len(st.torch.nodes_of("layer_norm"))
    n = _bundle(st, min(cands, max(0, -_excess(st, "layer_norm"))), bundle)
    return n, cands, {"layer_norm": -n, **{g: k * n for g, k in bundle.items()}}


@_rule("layer_norm_decomposed_jax2onnx")
def _ln_jax(st):
    """jax2onnx: Flax LayerNorm is decomposed: 2 ReduceMean (E[x], E[x²]) + 3 Mul + 2 Sub + Max (variance ≥ 0) + 2 Add + Sqrt + Div."""
    bundle = {"mean": 2, "mul": 3, "sub": 2, "maximum": 1, "add": 2, "sqrt": 1, "div": 1}
    cands = len(st.torch.nodes_of("layer_norm"))
    n = _bundle(st, min(cands, max(0, -_excess(st, "layer_norm"))), bundle)
    return n, cands, {"layer_norm": -n, **{g: k * n for g, k in bundle.items()}}


@_rule("gelu_erfc_form")
def _gelu_erfc(st):
    """Keras's exact GELU, 0.5·x·erfc(-x/√2), through tf2onnx (and perfcast's Erfc = 1 - Erf): Neg + Erf + Sub + 3 Mul."""
    bundle = {"neg": 1, "erf": 1, "sub": 1, "mul": 3}
    cands = len(st.torch.nodes_of("gelu"))
    n = _bundle(st, min(cands, max(0, -_excess(st, "gelu"))), bundle)
    return n, cands, {"gelu": -n, **{g: k * n for g, k in bundle.items()}}


@_rule("keras_take_negative_ids")
def _keras_take(st):
    """Keras's Embedding (keras.ops.take) wraps negative ids, where(ids < 0, ids + n, ids): Less + Not + 2 Add + 2 Mul on the token ids before the Gather (tf2onnx writes the select as arithmetic)."""
    bundle = {"compare": 1, "logical": 1, "add": 2, "mul": 2}
    cands = len(st.torch.nodes_of("embedding"))
    n = _bundle(st, cands, bundle)
    return n, cands, {g: k * n for g, k in bundle.items()}


def _linear_rank2(st):
    """A Linear with a bias on a rank-2 input exported as MatMul + Add (paddle2onnx, tf2onnx), not one Gemm."""
    t = st.torch
    cands = sum(1 for i in t.nodes_of("linear") if t.graph.nodes[i].attrs.get("bias")
                and t.graph.nodes[i].input_shapes and len(t.graph.nodes[i].input_shapes[0]) == 2)
    n = min(cands, max(0, _excess(st, "add")))
    return n, cands, {"add": n}


def install_rules() -> None:
    """Put :data:`FRAMEWORK_RULES` in front of ``onnx_agreement.RULES`` and the rank-2 Linear
    rule after ``linear_nd_as_matmul_add`` (both read the excess of Add), and document them."""
    if any(r.name == "classifier_softmax" for r in oa.RULES):
        return
    oa.RULES[:0] = FRAMEWORK_RULES
    doc = (_linear_rank2.__doc__ or "").strip().splitlines()[0]
    at = next(i for i, r in enumerate(oa.RULES) if r.name == "linear_nd_as_matmul_add") + 1
    oa.RULES.insert(at, oa.Rule("linear_2d_as_matmul_add", doc, _linear_rank2))
    for r in oa.RULES:
        oa.DOCUMENTED_DECOMPOSITIONS.setdefault(r.name, r.doc)


# ---------------------------------------------------------------------------------- graphs


def torch_graph(model: str, keras_layout: bool = False):
    """The PyTorch reference graph, as perfcast builds it (meta device, batch 1)."""
    import torch

    from perfcast.frontends import build_graph
    from perfcast.frontends.torch_frontend import graph_from_module
    from perfcast.workload import Workload

    if model == "resnet50" and keras_layout:
        return graph_from_module(fm.torch_resnet50_v1("meta"),
                                 (torch.zeros(1, 3, 224, 224, device="meta"),),
                                 model_id="torchvision resnet50 as v1", batch_size=1)
    if model in ("resnet50", "mobilenet_v2"):
        return build_graph(Workload.of(f"torchvision:{model}", batch_size=1))
    import transformers

    from perfcast.zoo.hf import HFWrapper, resolve_hf_config

    class BothOutputs(HFWrapper):
        """``BertModel`` returning ``(last_hidden_state, pooler_output)`` like the others
        (perfcast's wrapper returns the first only, which leaves the pooler out)."""

        def forward(self, input_ids):
            out = self.model(input_ids=input_ids, return_dict=True)
            return out.last_hidden_state, out.pooler_output

    config, _ = resolve_hf_config("bert-base-uncased")
    config.use_cache = False
    with torch.device("meta"):
        net = BothOutputs(transformers.AutoModel.from_config(config, attn_implementation="sdpa"))
    x = torch.zeros(1, SEQ_LEN, dtype=torch.long, device="meta")
    return graph_from_module(net.eval(), (x,), model_id="hf:bert-base-uncased (BertModel)",
                             batch_size=1)


def framework_graph(framework: str, model: str):
    """``(graph, prepared ModelProto, source)`` of ``model`` from ``framework``."""
    from perfcast.frontends.exported import graph_from_proto

    if framework == "tensorflow":
        from perfcast.frontends.tf_frontend import import_tf, onnx_from_keras

        _, keras, _ = import_tf("benchmark")
        if model == "bert":
            net, source = fm.keras_bert_base(keras, SEQ_LEN), \
                "keras.layers (benchmarks/framework_models.py); keras.applications has no BERT"
        else:
            from perfcast.zoo.keras_apps import keras_application

            name = {"resnet50": "ResNet50", "mobilenet_v2": "MobileNetV2"}[model]
            net, source, _ = keras_application(keras, name)
        proto, _ = onnx_from_keras(net, what=model)
        exporter = "tf2onnx"
    elif framework == "paddle":
        from perfcast.frontends.paddle_frontend import import_paddle, onnx_from_paddle_layer

        paddle, _ = import_paddle("benchmark")
        if model == "bert":
            net = fm.paddle_bert_base(paddle)
            inputs = [paddle.static.InputSpec([None, SEQ_LEN], "int64", "input_ids")]
            source = "paddle.nn.TransformerEncoder + embeddings, pooler " \
                     "(benchmarks/framework_models.py)"
        else:
            from perfcast.zoo.paddle_vision import paddle_vision_model

            net, source, shape = paddle_vision_model(paddle, model)
            inputs = [(1, *shape)]
        proto, _ = onnx_from_paddle_layer(net, inputs, what=model)
        exporter = "paddle2onnx"
    else:
        from perfcast.frontends.jax_frontend import onnx_from_jax

        make = {"resnet50": fm.flax_resnet50, "mobilenet_v2": fm.flax_mobilenet_v2,
                "bert": fm.flax_bert_base}[model]
        net, inputs = make()
        source = f"Flax NNX, benchmarks/framework_models.py:{make.__name__}"
        proto, _ = onnx_from_jax(net, inputs, what=model)
        exporter = "jax2onnx"
    graph = graph_from_proto(proto, framework=framework, exporter=exporter, model_id=source,
                             batch_size=1)
    return graph, proto, source


# ---------------------------------------------------------------------------------- run


def _one_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0][:240] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {msg}"


def run(models: list[str], frameworks: list[str]) -> list[dict]:
    install_rules()
    refs: dict[tuple[str, bool], object] = {}
    for m in models:  # PyTorch first (torch loads Triton before TensorFlow)
        refs[(m, False)] = torch_graph(m)
        if m == "resnet50" and "tensorflow" in frameworks:
            refs[(m, True)] = torch_graph(m, keras_layout=True)
    results = []
    for fw, fw_label, modules in FRAMEWORKS:
        if fw not in frameworks:
            continue
        missing = [x for x in modules if importlib.util.find_spec(x) is None]
        for m in models:
            row = {"model": m, "framework": fw, "framework_label": fw_label}
            if missing:
                row.update(status="skipped", reason=f"the {fw} extra is not installed "
                           f"(pip install 'perfcast[{fw}]'; missing: {', '.join(missing)})")
                results.append(row)
                continue
            keras_v1 = fw == "tensorflow" and m == "resnet50"
            ref = refs[(m, keras_v1)]
            t0 = time.perf_counter()
            try:
                graph, proto, source = framework_graph(fw, m)
                res = oa.compare_graphs(ref, graph, onnx_model=proto)
                res.pop("model", None)  # the reference's id: kept as "reference"
                row.update(status="ok", source=source, reference=ref.meta.model_id, **res)
                row["export_and_graph_s"] = round(time.perf_counter() - t0, 1)
                row["versions"] = graph.meta.extra.get("exporter", {})
                row["onnx_cleanup"] = graph.meta.extra.get("onnx_cleanup", {})
                if keras_v1:
                    v15 = refs[(m, False)]
                    row["vs_torchvision_v1_5"] = {
                        "torch_macs": float(v15.macs),
                        "macs_rel_diff": (graph.macs - v15.macs) / v15.macs}
            except Exception as exc:  # noqa: BLE001 - one failure is a row, the rest go on
                row.update(status="fail", reason=_one_line(exc))
            results.append(row)
            state = ("agree" if row.get("agree") else "DISAGREE") if row["status"] == "ok" \
                else f"{row['status']}: {row.get('reason', '')}"
            print(f"{fw:10s} {m:12s} {state} ({time.perf_counter() - t0:.1f} s)", flush=True)
    return results


# ---------------------------------------------------------------------------------- report


def _explained(r: dict) -> str:
    parts = []
    for rule, info in r.get("rules", {}).items():
        deltas = ", ".join(f"{g} {d:+d}" for g, d in info["deltas"].items())
        parts.append(f"{rule} ×{info['applied']} ({deltas})")
    for tag in ("constant_folding", "dead_code_elimination"):
        ds = [f"{d['group']} {d['delta']:+d}" for d in r.get("differences", []) if d["rule"] == tag]
        if ds:
            parts.append(f"{tag} ({', '.join(ds)})")
    return "; ".join(parts) or "-"


def _unexplained(r: dict) -> str:
    return ", ".join(f"{d['group']} {d['delta']:+d}" for d in r.get("unexplained", [])) or "-"


HEADER = ["architecture", "framework", "PyTorch reference", "PyTorch GMACs", "framework GMACs",
          "MACs diff %", "ops agree", "explained differences", "unexplained"]


def _rows(results: list[dict]) -> list[list[str]]:
    labels = dict(MODELS)
    rows = []
    for r in results:
        head = [labels[r["model"]], r["framework_label"]]
        if r["status"] != "ok":
            rows.append(head + ["-", "-", "-", "-", r["status"], r.get("reason", ""), "-"])
            continue
        rows.append(head + [r["reference"], f"{r['torch_macs'] / 1e9:.4f}",
                            f"{r['onnx_macs'] / 1e9:.4f}", f"{100 * r['macs_rel_diff']:+.3f}",
                            "yes" if r["ops_agree"] else "no", _explained(r), _unexplained(r)])
    return rows


def _summary(results: list[dict]) -> dict:
    ok = [r for r in results if r["status"] == "ok"]
    used: list[str] = []
    for r in ok:
        used += [x for x in r.get("explained", []) if x not in used]
    return {"pairs": len(results), "compared": len(ok),
            "macs_within_2pct": sum(1 for r in ok if r["macs_agree"]),
            "ops_agree": sum(1 for r in ok if r["ops_agree"]),
            "not_compared": [{k: r.get(k) for k in ("model", "framework", "status", "reason")}
                             for r in results if r["status"] != "ok"],
            "decompositions_used": used}


def _markdown(results: list[dict], summary: dict, command: str, wall: float) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    vers: dict[str, str] = {}
    for r in results:
        for k, v in (r.get("versions") or {}).items():
            if k != "name":
                vers[k] = v
    lines = [
        "# Framework independence: TensorFlow / Keras, PaddlePaddle and JAX vs PyTorch", "",
        "The same architecture from each framework — exported by the framework's ONNX exporter "
        "and read by perfcast's exporter frontend (`perfcast.frontends.exported`: shape "
        "computations folded, weights never read) — and from PyTorch (perfcast's PyTorch "
        "frontend, meta device), batch 1, random weights, nothing downloaded. Total MACs must "
        "agree within 2 %; op counts are compared per comparison group after the documented "
        "decompositions (`benchmarks/onnx_agreement.py` plus the exporters' own, listed "
        "below); shape plumbing is reported there but not compared.", "",
        f"Regenerate: `{command}` ({wall:.0f} s on this machine's CPU).", "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(vers.items())) + ".", "",
        "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in _rows(results):
        lines.append("| " + " | ".join(esc(c) for c in row) + " |")
    n = summary["pairs"]
    lines += ["", f"- {summary['macs_within_2pct']}/{n} architecture × framework pairs: MACs "
              f"within 2 %",
              f"- {summary['ops_agree']}/{n} pairs: op counts agree modulo documented "
              f"decompositions"]
    for f in summary["not_compared"]:
        lines.append(f"- not compared: {f['model']} from {f['framework']}: {f['status']}: "
                     f"{esc(f['reason'])}")
    lines += ["", "## Where the models come from", ""]
    for r in results:
        if r["status"] == "ok":
            extra = ""
            if "vs_torchvision_v1_5" in r:
                v = r["vs_torchvision_v1_5"]
                extra = (f" — against torchvision's ResNet-50 v1.5 "
                         f"({v['torch_macs'] / 1e9:.4f} GMACs) its MACs differ by "
                         f"{100 * v['macs_rel_diff']:+.2f} %: the architectures differ, not the "
                         f"frontends")
            lines.append(f"- {dict(MODELS)[r['model']]}, {r['framework_label']}: {esc(r['source'])}"
                         f"; PyTorch: {esc(r['reference'])}{extra}")
    lines += ["", "## Documented decompositions", ""]
    for name, text in oa.DOCUMENTED_DECOMPOSITIONS.items():
        mark = " (used above)" if name in summary["decompositions_used"] else ""
        lines.append(f"- `{name}`{mark}: {text}")
    return "\n".join(lines) + "\n"


def run_isolated(models: list[str], frameworks: list[str]) -> list[dict]:
    """:func:`run` for one framework at a time, each in a fresh Python process (its memory —
    TensorFlow's freezing of a BERT-base peaks near 10 GB — goes back after it; the
    frameworks' native libraries never meet). Results come back as JSON."""
    import subprocess
    import tempfile

    results: list[dict] = []
    for fw in frameworks:
        with tempfile.TemporaryDirectory(prefix="perfcast-frameworks-") as tmp:
            out = Path(tmp) / "results.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out),
                   "--models", ",".join(models), "--frameworks", fw]
            proc = subprocess.run(cmd, check=False)
            if proc.returncode == 0 and out.is_file():
                results += json.loads(out.read_text())
                continue
        for m in models:
            results.append({"model": m, "framework": fw, "status": "fail",
                            "framework_label": dict((f, lab) for f, lab, _ in FRAMEWORKS)[fw],
                            "reason": f"worker process exited with {proc.returncode}"})
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(m for m, _ in MODELS))
    ap.add_argument("--frameworks", default=",".join(f for f, _, _ in FRAMEWORKS))
    ap.add_argument("--out", type=Path, default=REPO / "reports" / "frameworks")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    frameworks = [f.strip() for f in a.frameworks.split(",") if f.strip()]
    bad = [m for m in models if m not in dict(MODELS)] + \
        [f for f in frameworks if f not in [x for x, _, _ in FRAMEWORKS]]
    if bad:
        print(f"unknown: {', '.join(bad)} (models: {', '.join(dict(MODELS))}; frameworks: "
              f"{', '.join(f for f, _, _ in FRAMEWORKS)})", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if a.worker is not None:  # one framework, results to a JSON file (run_isolated)
        a.worker.write_text(json.dumps(run(models, frameworks), default=str))
        return 0
    install_rules()  # their documentation, for the report
    t0 = time.perf_counter()
    results = run_isolated(models, frameworks)
    wall = time.perf_counter() - t0
    summary = _summary(results)
    summary["wall_s"] = round(wall, 1)
    for r in results:
        if r["status"] == "ok" and r.get("unexplained"):
            print(f"{r['framework']} {r['model']}: unexplained {_unexplained(r)}")
    print(f"{summary['macs_within_2pct']}/{summary['pairs']} pairs: MACs within 2 %")
    print(f"{summary['ops_agree']}/{summary['pairs']} pairs: op counts agree modulo documented "
          f"decompositions")
    default = (a.models == ",".join(m for m, _ in MODELS)
               and a.frameworks == ",".join(f for f, _, _ in FRAMEWORKS))
    command = "python benchmarks/frameworks_report.py" + (
        "" if default else f" --models {a.models} --frameworks {a.frameworks}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{a.out}.md").write_text(_markdown(results, summary, command, wall))
    Path(f"{a.out}.json").write_text(json.dumps(
        {"command": command, "summary": summary, "counts": _counts(results),
         "results": results}, indent=2, default=str))
    print(f"wrote {a.out}.md and {a.out}.json")
    return 0


def _counts(results: list[dict]) -> dict:
    """Compared node counts per group, per pair (for reading the JSON)."""
    out = {}
    for r in results:
        if r["status"] == "ok":
            out[f"{r['framework']}/{r['model']}"] = {
                g: {"torch": v["torch"], "framework": v["onnx"]}
                for g, v in r["groups"].items() if v["compute"]
                and (v["torch"] or v["onnx"])}
    return out


if __name__ == "__main__":
    sys.exit(main())
