"""Issue #30: prefill as its own model (perfcast.llm.prefill), int4 / int8 / GGUF precisions,
power by phase (perfcast.llm.energy.PhasePower) and the serving planner
(perfcast plan --mode generate, perfcast.decisions.serving)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from perfcast.faces.cli import main

LLAMA7 = "hf:meta-llama/Llama-2-7b-hf"
ACCEPT_PREDICT = ["predict", LLAMA7, "--mode", "generate", "--framework", "llama.cpp",
                  "--precision", "int4", "--input-len", "1024", "--output-len", "1", "--device",
                  "rtx4090", "--json"]
ACCEPT_PLAN = ["plan", "hf:meta-llama/Llama-2-13b-hf", "--mode", "generate", "--device",
               "a100-80gb", "--rate", "5", "--input-len", "512", "--output-len", "256",
               "--slo-tpot", "50"]


def _json(capsys, *args):
    rc = main([*args])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


# --------------------------------------------------------------------------- prefill pricing
def test_passes_by_hand():
    from perfcast.llm.prefill import passes

    # llama.cpp: one prompt of 1,000 tokens in ubatches of 512: 512 then 488, context growing
    p = passes(1, 1000, 512)
    assert p["tokens"].tolist() == [512, 488] and p["count"].tolist() == [1, 1]
    assert p["attention"].tolist() == [512 * 513 / 2, 488 * 512 + 488 * 489 / 2]
    assert p["kv_read"].tolist() == [512, 1000] and p["finished"].tolist() == [0, 1]
    # vLLM: 5 prompts of 512 with a 2,048-token chunk: one pass of 4 prompts, one of 1
    p = passes(5, 512, 2048)
    assert p["count"].tolist() == [1, 1] and p["tokens"].tolist() == [2048, 512]
    assert p["finished"].tolist() == [4, 1]
    assert p["attention"].sum() == pytest.approx(5 * 512 * 513 / 2)
    # no chunk: everything in one pass
    p = passes(3, 100, None)
    assert p["tokens"].tolist() == [300] and p["count"].tolist() == [1]


def _estimate(engine="vllm", precision="fp16", device="a100-80gb", batch=1, input_len=1024,
              **kw):
    from perfcast.devices import get_device
    from perfcast.llm.arch import llm_arch
    from perfcast.llm.prefill import estimate_prefill
    from perfcast.shipped import load_shipped

    kw.setdefault("constants", load_shipped("llm-prefill"))
    return estimate_prefill(llm_arch(LLAMA7), get_device(device), engine=engine,
                            precision=precision, batch=batch, input_len=input_len, **kw)


def test_prefill_flops_and_quadratic_attention():
    from perfcast.llm.arch import llm_arch

    a = llm_arch(LLAMA7)
    e = _estimate(input_len=1024)
    # GEMMs: 2 × the multiplied parameters per token — all but the embedding, the LM head and
    # the 2L + 1 RMSNorm weights — (+ the last token's LM head) + causal attention
    gemm = 2 * 1024 * (a.params - a.embedding_params - a.vocab * a.hidden
                       - (2 * a.layers + 1) * a.hidden)
    attn = 4 * a.layers * a.heads * a.head_dim * 1024 * 1025 / 2
    head = 2 * a.vocab * a.hidden
    assert e.flops == pytest.approx(gemm + attn + head, rel=1e-6)
    # attention grows with the square of the prompt, the GEMMs linearly
    e2 = _estimate(input_len=2048)
    assert e2.parts["attention"] / e.parts["attention"] > 3.0
    assert 1.8 < e2.parts["gemm"] / e.parts["gemm"] < 2.2
    assert e.seconds == pytest.approx(sum(e.parts.values()))
    assert 0.5 < e.compute_bound <= 1.0  # a 1,024-token prefill is compute-bound
    # at least the FLOPs at peak, at most 4× that
    assert e.flops / e.peak < e.seconds < 4 * e.flops / e.peak


def test_prefill_dequantisation_by_engine():
    q4 = _estimate("llama.cpp", "Q4_K_M", "rtx4090")
    f16 = _estimate("llama.cpp", "F16", "rtx4090")
    assert q4.parts["dequant"] > 0 and f16.parts["dequant"] == 0
    assert q4.seconds > f16.seconds  # the FP16 copy costs a pass over the weights per ubatch
    # ubatches of ≤ 32 tokens run llama.cpp's quantized kernels: no dequantisation pass
    small = _estimate("llama.cpp", "Q4_K_M", "rtx4090", chunk=32)
    assert small.parts["dequant"] == 0 and small.passes == 32
    # vLLM's weight-only int4 GEMMs dequantise in the kernel; Hugging Face's per forward
    assert _estimate("vllm", "int4").parts["dequant"] == 0
    assert _estimate("hf", "int4").parts["dequant"] > 0


def test_geforce_fp16_accumulate_only_for_llama_cpp():
    from perfcast.devices import get_device

    spec = get_device("rtx4090").peak_tflops("fp16") * 1e12
    assert _estimate("llama.cpp", "F16", "rtx4090").peak == pytest.approx(2 * spec)
    assert _estimate("vllm", "fp16", "rtx4090").peak == pytest.approx(spec)
    a100 = get_device("a100-80gb").peak_tflops("fp16") * 1e12
    assert _estimate("llama.cpp", "F16", "a100-80gb").peak == pytest.approx(a100)


def test_llama_cpp_layer_split_pipelines_the_prompt():
    one = _estimate("llama.cpp", "F16", "h100-sxm", chunk=1, input_len=256)
    two = _estimate("llama.cpp", "F16", "h100-sxm", chunk=1, input_len=256, n_devices=2)
    assert 1.3 < one.seconds / two.seconds <= 2.0


def test_tensor_parallel_prefill_is_faster_and_communicates():
    one = _estimate(input_len=4096)
    four = _estimate(input_len=4096, n_devices=4)
    assert four.parts["comm"] > 0 and one.parts["comm"] == 0
    assert four.seconds < one.seconds


# --------------------------------------------------------------------------- precisions
def test_gguf_precisions_parse_and_refuse():
    from perfcast.errors import PerfcastError
    from perfcast.generation import resolve
    from perfcast.llm.arch import WEIGHT_BYTES
    from perfcast.workload import Workload

    w = Workload.of(LLAMA7, mode="generate", engine="llama.cpp", precision="q4_k_m",
                    input_len=8, output_len=8)
    assert w.precision == "Q4_K_M" and WEIGHT_BYTES["Q4_K_M"] == pytest.approx(4.90 / 8)
    assert WEIGHT_BYTES["Q8_0"] == pytest.approx(8.51 / 8) and WEIGHT_BYTES["F16"] == 2.0
    for generic, gguf in (("int4", "Q4_K_M"), ("int8", "Q8_0"), ("fp16", "F16")):
        r = resolve(Workload.of(LLAMA7, mode="generate", engine="llama.cpp",
                                precision=generic, input_len=8, output_len=8))
        # one request; llama.cpp's own logical / physical batch: llama-bench's defaults
        assert r.precision == gguf and r.batch_size == 1
        assert (r.n_batch, r.n_ubatch) == (2048, 512)
    assert resolve(Workload.of(LLAMA7, mode="generate", precision="int4", input_len=8,
                               output_len=8)).precision == "int4"  # vLLM keeps it
    with pytest.raises(PerfcastError, match="GGUF format of llama.cpp"):
        Workload.of(LLAMA7, mode="generate", precision="Q4_K_M", input_len=8, output_len=8)
    with pytest.raises(PerfcastError):
        Workload.of("timm:resnet18", precision="Q8_0")


def test_gguf_on_vllm_is_one_line_exit_2(capsys):
    rc = main(["predict", LLAMA7, "--mode", "generate", "--device", "a100-80gb", "--precision",
               "Q8_0", "--input-len", "8", "--output-len", "8"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "GGUF format of llama.cpp" in err and len(err.splitlines()) == 1


# --------------------------------------------------------------------------- acceptance 1
def test_acceptance_prefill_only_request(capsys):
    d = _json(capsys, *ACCEPT_PREDICT)
    assert d["precision"] == "Q4_K_M" and d["output_len"] == 1
    assert d["ttft_ms_low"] < d["ttft_ms"] < d["ttft_ms_high"] and d["coverage"] == 0.9
    assert d["time_ms"] == pytest.approx(d["ttft_ms"]) and d["tpot_ms"] is None
    assert d["prefill"]["passes"] == 2 and d["prefill"]["tokens_per_pass"] == 512
    assert d["prefill"]["parts_ms"]["dequant"] > 0
    assert any(n.startswith("ttft_ms: prefill priced on its own") for n in d["notes"])
    assert any("GeForce" in n for n in d["notes"])
    assert any("priced as GGUF Q4_K_M" in n for n in d["notes"])
    assert set(d["energy_by_phase_j"]) == {"prefill"}
    assert d["energy_j"] == pytest.approx(d["energy_by_phase_j"]["prefill"])
    assert 45 <= d["power_w"] <= 450


# --------------------------------------------------------------------------- power by phase
def test_power_by_phase(capsys):
    base = ["predict", LLAMA7, "--mode", "generate", "--device", "h100-sxm", "--input-len",
            "2048", "--output-len", "128", "--json"]
    one = _json(capsys, *base, "--batch-size", "1")
    many = _json(capsys, *base, "--batch-size", "64")
    for d in (one, many):
        pre, dec = d["power_by_phase_w"]["prefill"], d["power_by_phase_w"]["decode"]
        assert 70 <= dec < pre <= 700  # decode memory-bound below the compute-bound prefill
        assert d["energy_j"] == pytest.approx(sum(d["energy_by_phase_j"].values()))
        assert d["energy_by_phase_j"]["prefill"] == pytest.approx(pre * d["ttft_ms"] / 1e3)
        assert d["energy_per_token_j"] == pytest.approx(
            d["energy_j"] / (d["batch_size"] * 128))
    # decode power grows with the batch; energy per token falls
    assert many["power_by_phase_w"]["decode"] > one["power_by_phase_w"]["decode"]
    assert many["energy_per_token_j"] < one["energy_per_token_j"]


def test_phase_power_by_hand(tmp_path):
    """The phase power is the power model's: idle + TDP x (static + c_tensor h(cu) +
    c_memory h(mu)), h(1) = 1, bounded to [idle, TDP]; the phase id reads the same file."""
    from perfcast.devices import get_device
    from perfcast.energy import PowerModel
    from perfcast.llm.energy import PhasePower, utilisation
    from perfcast.shipped import artefact_path

    assert PhasePower is PowerModel
    assert artefact_path("llm-phase-power") == artefact_path("power-model")
    pp = PowerModel(families={}, pooled=[0.1, 0.9, 0.3, 0.2], u0=0.1, step_coef=[0.0],
                    step_mean=[], step_scale=[], step_families={}, k=6.0, c=0.9,
                    gamma=1.0, beta=2.0, trained_on={})
    dev = get_device("a100-80gb")  # 400 W, idle 10 % assumed
    assert pp.power(dev, 1.0, 1.0) == pytest.approx(40 + 400 * (0.1 + 0.3 + 0.2))
    assert pp.power(dev, 0.0, 0.0) == pytest.approx(40 + 400 * 0.1)
    assert pp.power(dev, 1.0, 1.0, tensor=False) == pytest.approx(400)  # capped at TDP
    mu, cu = utilisation(312e12, 2039e9, 1.0, dev)
    assert (float(mu), float(cu)) == pytest.approx((1.0, 1.0))
    path = pp.save(tmp_path)
    assert PowerModel.load(path) == pp


# --------------------------------------------------------------------------- planner
def test_acceptance_plan_ranked_table(capsys):
    rc = main(ACCEPT_PLAN)
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "winner:" in out.out and "deployments meet it" in out.out


def test_plan_json_ranking_and_slo_filter(capsys):
    d = _json(capsys, *ACCEPT_PLAN, "--price-per-hour", "4", "--json", "--top", "100")
    rows = d["rows"]
    assert d["winner"] == rows[0] and d["feasible"] == sum(r["meets_slo"] for r in rows)
    ok = [r for r in rows if r["meets_slo"]]
    assert all(r["tpot_ms"] <= 50 for r in ok)
    assert [r["gpus"] for r in ok] == sorted(r["gpus"] for r in ok)  # cheapest first
    w = d["winner"]
    assert w["gpus"] == w["replicas"] * w["tensor_parallel"]
    assert w["usd_per_hour"] == pytest.approx(4 * w["gpus"])
    # USD per 1M output tokens = the fleet's hourly price ÷ the output tokens it serves an hour
    assert w["usd_per_1m_output_tokens"] == pytest.approx(
        w["usd_per_hour"] / (5 * 256 * 3600) * 1e6)
    assert w["kwh_per_1m_output_tokens"] == pytest.approx(
        w["energy_j_per_output_token"] * 1e6 / 3.6e6)
    # the rate the winner's replicas carry is below what saturates them
    assert 5 / w["replicas"] < w["saturation_rate"]


@pytest.mark.slow
def test_plan_tight_slo_has_no_winner_and_more_rate_more_gpus():
    import perfcast

    kw = dict(mode="generate", device="a100-80gb", input_len=512, output_len=256)
    tight = perfcast.plan("hf:meta-llama/Llama-2-13b-hf", rate=5, slo_tpot_ms=1, **kw)
    assert tight.winner is None and tight.feasible == 0
    assert all(r.why for r in tight.rows)
    assert any("no deployment meets the SLOs" in n for n in tight.notes)
    low = perfcast.plan("hf:meta-llama/Llama-2-13b-hf", rate=1, slo_tpot_ms=50, **kw)
    high = perfcast.plan("hf:meta-llama/Llama-2-13b-hf", rate=40, slo_tpot_ms=50, **kw)
    assert high.winner.gpus > low.winner.gpus
    capped = perfcast.plan("hf:meta-llama/Llama-2-13b-hf", rate=40, slo_tpot_ms=50, gpus=2,
                           **kw)
    assert capped.winner is None and any("> --gpus 2" in r.why for r in capped.rows)
    assert capped.to_dict(top=3)["rows_shown"] == 3


@pytest.mark.parametrize("extra,needle", [
    (["--rate", "0"], "--rate must be positive (requests/s)"),
    (["--rate", "5", "--batch-size", "8"], "apply to plan --mode train"),
    (["--rate", "5", "--slo-tpot", "-1"], "--slo-tpot-ms must be positive (ms)"),
    (["--rate", "5", "--tensor-parallel", "3"], "does not divide"),
])
def test_plan_generate_bad_input(extra, needle, capsys):
    rc = main(["plan", LLAMA7, "--mode", "generate", "--device", "a100-80gb", "--input-len",
               "128", "--output-len", "128", *extra])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and needle in err, err


def test_plan_mode_rules(capsys):
    rc = main(["plan", LLAMA7, "--mode", "generate", "--device", "a100-80gb", "--input-len",
               "128", "--output-len", "128"])
    assert rc == 2 and "needs --rate" in capsys.readouterr().err
    rc = main(["plan", LLAMA7, "--device", "a100-80gb"])
    assert rc == 2 and "needs --gpus" in capsys.readouterr().err
    rc = main(["plan", LLAMA7, "--gpus", "2", "--device", "a100-80gb", "--rate", "3"])
    assert rc == 2 and "--rate does not apply to --mode train" in capsys.readouterr().err


def test_queueing_model_by_hand():
    """A replica whose decode step is d(N) = 10 ms + 0.1 ms·N and prefill 20 ms per request:
    the fixed point, the saturation rate and the waits as the formulas give them."""
    from perfcast.decisions.serving import capacity, replica_at, saturation_rate

    class Rep:
        req = type("R", (), {"output_len": 101})()
        t_pre, t_alone, prefill_passes, has_power, idle = 0.02, 0.02, 1, False, 0.0

        @staticmethod
        def step(n):
            return 0.010 + 0.0001 * max(n, 1.0)

    lam = 2.0
    st = replica_at(Rep, lam, 64)
    rho = lam * 0.02
    n = st["running"]
    assert n == pytest.approx(lam * 100 * Rep.step(n) / (1 - rho), rel=1e-6)  # Little
    assert st["tpot_s"] == pytest.approx(Rep.step(n) / (1 - rho))
    assert st["prefill_share"] == pytest.approx(rho)
    assert st["ttft_s"] > 0.02  # at least its own prefill
    sat = saturation_rate(Rep, 64)
    assert sat == pytest.approx(64 / (100 * Rep.step(64) + 64 * 0.02))
    assert replica_at(Rep, sat * 1.01, 64) is None  # beyond saturation the queue grows
    # capacity within a TPOT SLO is where the TPOT reaches it
    cap = capacity(Rep, 64, None, 0.012)
    assert replica_at(Rep, cap, 64)["tpot_s"] == pytest.approx(0.012, rel=1e-3)
    assert capacity(Rep, 64, None, 0.005) == 0.0  # below one step: never


# --------------------------------------------------------------------------- fits
def test_operator_fit_recovers_its_constants():
    """Synthetic GEMM and memory-bound rows made by the model itself are fitted back."""
    import pandas as pd

    from perfcast.training.prefill import _gemm_pred, _memop_pred, fit_operators

    rng = np.random.default_rng(0)
    rows = []
    truth_g, truth_m = (8e-6, 0.7, 0.8, 2.0), (4e-6, 0.6)
    for _ in range(400):
        M, N, K = (int(x) for x in rng.choice([1, 16, 128, 1024, 4096], 1).tolist()
                   + rng.choice([1024, 4096, 11008], 2).tolist())
        rows.append({"kernel_class": "gemm", "operator": "mlp_up_proj", "M": M, "N": N,
                     "K": K, "B": np.nan, "H": np.nan, "device_key": "a100-80gb"})
        t = int(rng.choice([16, 512, 8192]))
        rows.append({"kernel_class": "norm", "operator": "input_layernorm", "M": np.nan,
                     "N": np.nan, "K": np.nan, "B": t, "H": 4096, "device_key": "a100-80gb"})
    df = pd.DataFrame(rows)
    peak, bw = 312e12, 2039e9
    g = df["kernel_class"] == "gemm"
    c = 2.0 * df["M"] * df["N"] * df["K"] / peak
    m_g = 2.0 * (df["N"] * df["K"] + df["M"] * df["K"] + df["M"] * df["N"]) / bw
    m_n = 4.0 * df["B"] * df["H"] / bw
    df["latency_ms"] = np.where(g, _gemm_pred(truth_g, c, m_g), _memop_pred(truth_m, m_n)) * 1e3
    fit = fit_operators(df)
    assert [fit["gemm"][k] for k in ("tau_s", "eta", "beta", "p")] == pytest.approx(
        truth_g, rel=0.02)
    assert [fit["memop"][k] for k in ("tau_s", "eta")] == pytest.approx(truth_m, rel=0.02)


def test_prompt_differences_pair_rows_by_n_batch():
    import pandas as pd

    from perfcast.training.prefill import prompt_differences

    base = {"device": "h100-sxm", "n_devices": 1, "model": "m", "input_len": 128,
            "output_len": 128, "precision": "fp16", "framework": "llama.cpp"}
    df = pd.DataFrame([{**base, "batch_size": 1, "n_batch": b, "latency_s": s}
                       for b, s in ((1, 2.5), (16, 1.4), (64, 1.3))]
                      + [{**base, "framework": "vllm", "batch_size": 1, "n_batch": None,
                          "latency_s": 1.0}])
    d = prompt_differences(df).sort_values("n_batch_a")
    assert d["n_batch_a"].tolist() == [1, 16] and (d["n_batch_b"] == 64).all()
    assert d["measured_s"].tolist() == pytest.approx([1.2, 0.1])


@pytest.mark.slow
def test_shipped_prefill_and_phase_power_rebuild(tmp_path):
    """perfcast train --recipe llm --only prefill,phase-power reproduces the shipped files."""
    from perfcast.shipped import shipped_dir

    assert main(["train", "--recipe", "llm", "--only", "prefill,phase-power", "--out",
                 str(tmp_path), "--json"]) == 0
    new = json.loads((tmp_path / "llm-prefill" / "config.json").read_text())
    assert new == json.loads((shipped_dir() / "llm-prefill" / "config.json").read_text())
    new = json.loads((tmp_path / "power_model.json").read_text())  # phase-power = power model
    assert new == json.loads((shipped_dir() / "power_model.json").read_text())
