"""TensorFlow / Keras, PaddlePaddle and JAX models through their ONNX exporters (issue #20):
spec recognition, the missing-extra message, and — with each extra installed — ``perfcast
inspect --json`` / ``predict`` / ``load_graph`` on tiny models built in the test (no downloads),
exact MACs, weights never read (the weights files are corrupted first), one-line errors.

The framework tests skip, saying which extra is missing, when ``perfcast[tensorflow]``,
``perfcast[paddle]`` or ``perfcast[jax]`` is not installed. TensorFlow is imported only through
:func:`perfcast.frontends.tf_frontend.import_tf` (it loads torch's Triton first: Triton loaded
after TensorFlow crashes the process).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from perfcast.faces.cli import main
from perfcast.errors import ModelSpecError, PerfcastError
from perfcast.workload import ModelSpec, Workload, file_kind


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _skip_unless(extra: str, *modules: str):
    gone = _missing(*modules)
    return pytest.mark.skipif(bool(gone), reason=f"the {extra} extra is not installed "
                              f"(pip install 'perfcast[{extra}]'; missing: {', '.join(gone)})")


needs_tf = _skip_unless("tensorflow", "tensorflow", "keras", "tf2onnx")
needs_paddle = _skip_unless("paddle", "paddle", "paddle2onnx")
needs_jax = _skip_unless("jax", "jax", "flax", "jax2onnx")

#: Tiny CNN used for every framework: Conv(3→4, 3×3, valid) + bias, ReLU, global average pool,
#: Dense(4→2) on 3×8×8 images: 6·6·4·27 + 4·2 MACs per sample, 4·27+4 + 4·2+2 parameters.
TINY_MACS = 6 * 6 * 4 * 27 + 4 * 2
TINY_PARAMS = 4 * 27 + 4 + 4 * 2 + 2


def _inspect(capsys, *args) -> dict:
    assert main(["inspect", *map(str, args), "--json", "--no-cache"]) == 0, \
        capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _fails(capsys, args, code: int = 2) -> str:
    assert main([str(a) for a in args]) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) <= 2, err  # rich may wrap once
    return " ".join(err.split())


# ---------------------------------------------------------------------------------- no extra


def test_files_are_recognised_by_format(tmp_path):
    (tmp_path / "m.keras").write_bytes(b"PK")
    sm = tmp_path / "exported"
    sm.mkdir()
    (sm / "saved_model.pb").write_bytes(b"")
    (tmp_path / "p.pdmodel").write_bytes(b"")
    (tmp_path / "prog.json").write_text('{"base_code":{"magic":"pir","version":1},"program":{}}')
    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    assert file_kind(str(tmp_path / "m.keras")) == "tensorflow"
    assert file_kind(str(sm)) == "tensorflow"
    assert file_kind(str(tmp_path / "p.pdmodel")) == "pdmodel"
    assert file_kind(str(tmp_path / "prog.json")) == "pdmodel"
    assert file_kind(str(tmp_path / "config.json")) is None
    spec = ModelSpec.parse(str(sm / "saved_model.pb"))
    assert (spec.kind, spec.name, spec.framework) == ("tensorflow", str(sm), "tensorflow")
    assert ModelSpec.parse(str(tmp_path / "prog.json")).kind == "pdmodel"
    assert ModelSpec.parse("keras:ResNet50").kind == "keras"
    assert ModelSpec.parse("paddle:resnet50").kind == "paddle"
    assert ModelSpec.parse("jax:pkg.mod:make").name == "pkg.mod:make"
    with pytest.raises(ModelSpecError, match="file not found"):
        ModelSpec.parse(str(tmp_path / "missing.keras"))
    with pytest.raises(ModelSpecError, match="is a folder, not a model file"):
        ModelSpec.parse(str(tmp_path))
    assert ModelSpec.parse("keras.Model:x").kind == "module"  # in-process kinds: no prefix


def test_zoo_defaults_and_no_pytorch_module():
    from perfcast.zoo import build_model, resolve_input

    assert resolve_input(Workload.of("keras:InceptionV3")).input_size == (3, 299, 299)
    assert resolve_input(Workload.of("keras:ResNet50")).input_size == (3, 224, 224)
    assert resolve_input(Workload.of("paddle:inception_v3")).input_size == (3, 299, 299)
    assert resolve_input(Workload.of("paddle:mobilenet_v2")).input_size == (3, 224, 224)
    with pytest.raises(PerfcastError, match="image model"):
        Workload.of("keras:ResNet50", seq_len=128)
    with pytest.raises(PerfcastError, match="needs a PyTorch model"):
        build_model(Workload.of("paddle:resnet50"))
    from perfcast.routing import simulation_applies

    assert not simulation_applies(Workload.of("keras:ResNet50"))
    assert simulation_applies(Workload.of("timm:resnet18"))


def test_exporter_graph_keys_carry_exporter_versions():
    key = Workload.of("keras:ResNet50").key()
    assert key != Workload.of("keras:ResNet101").key()
    assert Workload.of("keras:ResNet50", batch_size=2).key() != key


@pytest.mark.parametrize("spec,modules,extra", [
    ("keras:ResNet50", ("tensorflow", "keras", "tf2onnx"), "tensorflow"),
    ("paddle:resnet50", ("paddle", "paddle2onnx"), "paddle"),
    ("jax:tests.framework_models:tiny_jax_mlp", ("jax", "flax", "jax2onnx"), "jax"),
])
@pytest.mark.parametrize("missing", ["framework", "exporter"])
def test_without_the_extra_the_error_names_it(capsys, monkeypatch, spec, modules, extra,
                                              missing):
    """Runs with or without the extras: their imports are made to fail (the framework's and
    the exporter's, or the exporter's alone)."""
    blocked = modules if missing == "framework" else modules[-1:]
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed: import fails
    if missing == "exporter" and _missing(*modules[:-1]):
        pytest.skip(f"the {extra} framework is not installed (pip install 'perfcast[{extra}]')")
    msg = _fails(capsys, ["inspect", spec, "--no-cache"])
    assert f"needs the {extra} extra: pip install 'perfcast[{extra}]'" in msg
    assert f"({blocked[0]} is not installed" in msg


def test_training_graphs_are_refused(capsys):
    assert "inference graphs only" in _fails(capsys, ["inspect", "keras:ResNet50", "--mode",
                                                      "train", "--no-cache"])


def test_exported_shape_computations_are_folded():
    """What exporters write (tf2onnx: Shape → Slice → ReduceProd → Concat → Reshape; paddle2onnx:
    Constant → Identity → Squeeze → Range) is folded once the batch is bound, so the MatMul
    after it has shapes and MACs; large weights are dropped (external data, never read)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from perfcast.frontends.exported import graph_from_proto

    def const(name, value):
        return helper.make_node("Constant", [], [name],
                                value=numpy_helper.from_array(np.asarray(value), name))

    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        const("i0", np.array([0], np.int64)), const("i2", np.array([2], np.int64)),
        const("i3", np.array([3], np.int64)),
        helper.make_node("Slice", ["s", "i0", "i2"], ["lead"]),
        helper.make_node("ReduceProd", ["lead"], ["rows"], keepdims=1),
        helper.make_node("Slice", ["s", "i2", "i3"], ["cols"]),
        helper.make_node("Concat", ["rows", "cols"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["x2"]),
        helper.make_node("MatMul", ["x2", "w"], ["y"]),
        const("start", np.array([0], np.int64)), const("limit", np.array([96], np.int64)),
        const("step", np.array([1], np.int64)),
    ]
    for n in ("start", "limit", "step"):
        nodes += [helper.make_node("Identity", [n], [f"{n}_id"]),
                  helper.make_node("Squeeze", [f"{n}_id"], [f"{n}_0"])]
    nodes += [helper.make_node("Range", ["start_0", "limit_0", "step_0"], ["r"]),
              helper.make_node("Cast", ["r"], ["rf"], to=TensorProto.FLOAT),
              helper.make_node("Add", ["y", "rf"], ["out"])]
    w = numpy_helper.from_array(np.ones((64, 96), np.float32), "w")  # > 4096 elements
    graph = helper.make_graph(
        nodes, "exported", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6, 64])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], [w])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    g = graph_from_proto(proto, framework="jax", exporter="test", model_id="folding",
                         batch_size=3)
    assert g.macs == 3 * 6 * 64 * 96
    assert g.summary()["op_counts"]["linear"] == 1 and "identity" not in g.summary()["op_counts"]
    cleanup = g.meta.extra["onnx_cleanup"]
    assert cleanup["identities"] == 3 and cleanup["folded"] >= 5 and cleanup["weights_dropped"] == 1
    assert proto.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL


# ---------------------------------------------------------------------------------- TensorFlow


@pytest.fixture(scope="module")
def keras_mod():
    from perfcast.frontends.tf_frontend import import_tf

    return import_tf("tests")[1]


def _tiny_keras(keras):
    inp = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3, activation="relu")(inp)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inp, keras.layers.Dense(2)(x), name="tiny")


def _corrupt_zip_member(path: Path, member: str) -> None:
    """Rewrite the zip at ``path`` with ``member`` replaced by garbage (weights never read)."""
    with zipfile.ZipFile(path) as z:
        items = {n: z.read(n) for n in z.namelist()}
    assert member in items
    items[member] = b"not an hdf5 file"
    with zipfile.ZipFile(path, "w") as z:
        for n, data in items.items():
            z.writestr(n, data)


def _check_tiny(d: dict, batch: int) -> None:
    assert d["macs"] == batch * TINY_MACS
    assert d["params"] == TINY_PARAMS
    assert d["input_shapes"] == [[batch, 3, 8, 8]]  # exported channels-first
    assert d["op_counts"]["conv2d"] == 1 and d["op_counts"]["linear"] == 1
    assert d["op_counts"]["relu"] == 1 and not d["unmapped_ops"]


@needs_tf
def test_keras_file_inspect_json(capsys, tmp_path, keras_mod):
    path = tmp_path / "tiny.keras"
    _tiny_keras(keras_mod).save(path)
    _corrupt_zip_member(path, "model.weights.h5")
    d = _inspect(capsys, path, "-b", "2")
    _check_tiny(d, 2)  # params include the Dense bias: random weights are never zero


@needs_tf
def test_saved_model_dir_weights_unread(capsys, tmp_path, keras_mod):
    sm = tmp_path / "exported"
    _tiny_keras(keras_mod).export(str(sm), verbose=False)
    for f in (sm / "variables").iterdir():  # the checkpoint is never read
        f.write_bytes(b"garbage")
    _check_tiny(_inspect(capsys, sm, "-b", "3"), 3)
    _check_tiny(_inspect(capsys, sm / "saved_model.pb"), 1)


@needs_tf
def test_keras_in_process_and_predict(capsys, tmp_path, keras_mod):
    import perfcast

    g = perfcast.load_graph(_tiny_keras(keras_mod), batch_size=4)
    assert g.meta.frontend == "tensorflow" and g.macs == 4 * TINY_MACS
    assert g.meta.frontend_version.startswith("tf2onnx-")
    path = tmp_path / "tiny.keras"
    _tiny_keras(keras_mod).save(path)
    assert main(["predict", str(path), "--device", "a100-40gb", "-b", "8", "--json",
                 "--no-cache"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["time_ms"] > 0 and p["batch_size"] == 8
    assert any("simulation needs a PyTorch model" in n for n in p["notes"])


@needs_tf
def test_keras_attention_and_exact_gelu(keras_mod):
    """Keras MultiHeadAttention (einsums: dynamic shape arithmetic after tf2onnx, folded) and
    the exact GELU (TensorFlow's Erfc, which tf2onnx leaves unconverted; perfcast converts it)."""
    import perfcast

    keras = keras_mod
    inp = keras.Input((5, 8))
    x = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(inp, inp)
    model = keras.Model(inp, keras.layers.Dense(8, activation="gelu")(x), name="attn")
    g = perfcast.load_graph(model, batch_size=2)
    # q, k, v, output projections 4·5·8·8; scores and weighted sum 2·(2 heads·5·5·4); Dense 5·8·8
    assert g.macs == 2 * (4 * 5 * 8 * 8 + 2 * 2 * 5 * 5 * 4 + 5 * 8 * 8)
    counts = g.summary()["op_counts"]
    assert counts["erf"] == 1 and counts["softmax"] == 1 and not g.meta.unmapped_ops


@needs_tf
def test_keras_errors_are_one_line(capsys, tmp_path, keras_mod):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"this is not a zip")
    assert "not a valid Keras model file" in _fails(capsys, ["inspect", bad])
    nocfg = tmp_path / "nocfg.keras"
    with zipfile.ZipFile(nocfg, "w") as z:
        z.writestr("metadata.json", "{}")
    assert "no config.json" in _fails(capsys, ["inspect", nocfg])
    sm = tmp_path / "sm"
    sm.mkdir()
    (sm / "saved_model.pb").write_bytes(b"\x00garbage")
    assert "not a valid TensorFlow SavedModel" in _fails(capsys, ["inspect", sm])
    assert "did you mean ResNet50" in _fails(capsys, ["inspect", "keras:ResNet5O"])


# ---------------------------------------------------------------------------------- Paddle


@pytest.fixture(scope="module")
def paddle_mod():
    from perfcast.frontends.paddle_frontend import import_paddle

    return import_paddle("tests")[0]


def _tiny_paddle(paddle):
    class Tiny(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.conv = paddle.nn.Conv2D(3, 4, 3)
            self.fc = paddle.nn.Linear(4, 2)

        def forward(self, x):
            x = paddle.nn.functional.relu(self.conv(x))
            x = paddle.nn.functional.adaptive_avg_pool2d(x, 1)
            return self.fc(paddle.flatten(x, 1))

    return Tiny()


@needs_paddle
def test_paddle_program_inspect_json_weights_unread(capsys, tmp_path, paddle_mod):
    paddle = paddle_mod
    prefix = tmp_path / "tiny"
    paddle.jit.save(_tiny_paddle(paddle), str(prefix),
                    input_spec=[paddle.static.InputSpec([None, 3, 8, 8], "float32", "x")])
    program = next(p for p in tmp_path.iterdir() if p.suffix in (".json", ".pdmodel"))
    (tmp_path / "tiny.pdiparams").write_bytes(b"garbage")  # never read
    d = _inspect(capsys, program, "-b", "2")
    _check_tiny(d, 2)
    from perfcast.frontends import exported

    kept = len(exported._MEMO)
    _check_tiny(_inspect(capsys, program, "-b", "4"), 4)  # the same export, bound again
    assert len(exported._MEMO) == kept


@needs_paddle
def test_legacy_pdmodel(capsys, tmp_path):
    code = ("import paddle\n"
            "class T(paddle.nn.Layer):\n"
            "    def __init__(self):\n"
            "        super().__init__(); self.conv = paddle.nn.Conv2D(3, 4, 3)\n"
            "    def forward(self, x):\n"
            "        return self.conv(x)\n"
            f"paddle.jit.save(T(), {str(tmp_path / 'legacy')!r}, input_spec=["
            "paddle.static.InputSpec([None, 3, 8, 8], 'float32', 'x')])\n")
    script = tmp_path / "make_legacy.py"  # a file: paddle.jit.save reads the layer's source
    script.write_text(code)
    env = {**os.environ, "FLAGS_enable_pir_api": "0", "GLOG_minloglevel": "2"}
    subprocess.run([sys.executable, str(script)], check=True, env=env, capture_output=True,
                   timeout=300)
    path = tmp_path / "legacy.pdmodel"
    assert path.is_file()
    d = _inspect(capsys, path)
    assert d["macs"] == 6 * 6 * 4 * 27 and d["params"] == 4 * 27 + 4
    path.write_bytes(b"x\n")  # parses as an empty ProgramDesc: refused before Paddle's loader
    assert "not a valid PaddlePaddle program" in _fails(capsys, ["inspect", path])


@needs_paddle
def test_paddle_layer_in_process_and_predict(capsys, tmp_path, paddle_mod):
    import perfcast

    layer = _tiny_paddle(paddle_mod)
    g = perfcast.load_graph(layer, example_inputs=(paddle_mod.zeros([5, 3, 8, 8]),))
    assert g.meta.batch_size == 5 and g.macs == 5 * TINY_MACS
    assert g.meta.frontend == "paddle" and g.meta.extra["parameters_not_read"] == 4
    r = perfcast.predict(layer, example_inputs=((2, 3, 8, 8),), device="a100-40gb")
    assert r.time_ms and r.time_ms > 0
    assert "did you mean resnet50" in _fails(capsys, ["inspect", "paddle:resnet5O"])
    bad = tmp_path / "bad.json"
    bad.write_text('{"base_code":{"magic":"pir"}, "program": 1}')
    assert "not a valid PaddlePaddle program" in _fails(capsys, ["inspect", bad])


# ---------------------------------------------------------------------------------- JAX


@needs_jax
def test_jax_spec_inspect_json(capsys):
    d = _inspect(capsys, "jax:tests.framework_models:tiny_flax_cnn", "-b", "5")
    # SAME padding: 8·8·4·27 MACs per sample, then Dense 4→2
    assert d["macs"] == 5 * (8 * 8 * 4 * 27 + 4 * 2)
    assert d["params"] == TINY_PARAMS and d["input_shapes"] == [[5, 3, 8, 8]]
    assert d["op_counts"]["conv2d"] == 1 and d["op_counts"]["linear"] == 1
    assert not d["unmapped_ops"]


@needs_jax
def test_jax_function_in_process_and_errors(capsys):
    import perfcast
    from tests.framework_models import tiny_jax_mlp

    fn, inputs = tiny_jax_mlp()
    g = perfcast.load_graph(fn, example_inputs=inputs)
    assert g.meta.frontend == "jax" and g.meta.batch_size == 3
    assert g.macs == 3 * (16 * 32 + 32 * 4)
    assert g.summary()["op_counts"] == {"linear": 2, "tanh": 1}
    assert "must return (function, example_inputs)" in _fails(
        capsys, ["inspect", "jax:tests.framework_models:not_a_pair"])
    assert "do not apply" in _fails(
        capsys, ["inspect", "jax:tests.framework_models:tiny_jax_mlp", "--input-size", "16"])
    assert main(["predict", "jax:tests.framework_models:tiny_jax_mlp", "--device", "rtx4090",
                 "--json", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out)["time_ms"] > 0


# ---------------------------------------------------------------------------------- agreement


@pytest.mark.slow
def test_framework_agreement_report(tmp_path):
    """``benchmarks/frameworks_report.py`` on MobileNetV2 (the quickest architecture; the full
    report is ``reports/frameworks.md``): every installed framework's graph has the PyTorch
    graph's MACs within 2 % and op counts that agree modulo the documented decompositions."""
    if not any(not _missing(*m) for m in (("tensorflow", "keras", "tf2onnx"),
                                           ("paddle", "paddle2onnx"), ("jax", "flax", "jax2onnx"))):
        pytest.skip("no framework extra is installed (pip install 'perfcast[tensorflow]', "
                    "'perfcast[paddle]' or 'perfcast[jax]')")
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "frameworks"
    subprocess.run([sys.executable, str(root / "benchmarks" / "frameworks_report.py"),
                    "--models", "mobilenet_v2", "--out", str(out)], check=True,
                   capture_output=True, timeout=1500)
    rows = json.loads(Path(f"{out}.json").read_text())["results"]
    compared = [r for r in rows if r["status"] == "ok"]
    assert compared and all(r["status"] in ("ok", "skipped") for r in rows), rows
    for r in compared:
        assert r["macs_agree"] and r["ops_agree"], (r["framework"], r["unexplained"])
