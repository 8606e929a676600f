"""Device registry: table contents, lookups, local CPU detection, feature vector."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from perfcast.devices import (
    Device,
    get_device,
    list_devices,
    local_cpu,
    register_device,
    unregister_device,
)
from perfcast.devices import detect, registry as reg
from perfcast.errors import PerfcastError

GPU_KEYS = [
    "a100-40gb", "a100-80gb", "a100-40gb-pcie", "a100-80gb-pcie", "h100-sxm", "h100-pcie",
    "h200", "v100-16gb", "v100-32gb", "t4", "l4", "a10", "rtx3090", "rtx4090", "rtx2080ti",
    "titan-rtx", "titan-xp",
    # the GPUs of NeuSight's data (issue #13)
    "p4", "p100-16gb-pcie", "v100-32gb-pcie", "mi100", "mi210", "mi250",
    # the accelerators of the LLM serving data and Vidur / Zeus (issues #14, #15)
    "a40", "mi300x", "max1550",
    # the Zeus power traces' fourth GPU (issue #15)
    "quadro-rtx-6000",
]
REQUIRED_KEYS = [*GPU_KEYS, "i9-10940x", "i7-12700h"]
#: Datasheet rows for GPUs users ask about and price lists name (issue #38), after the CPUs;
#: their conventions are checked in tests/test_spec_derivation.py.
ADDED_GPU_KEYS = ["b200", "gh200", "l40s", "a10g", "rtx6000-ada", "rtx5090"]

A100_40_MIG = ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
A100_80_MIG = ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"]
H200_MIG = ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
MIG = {
    "a100-40gb": A100_40_MIG, "a100-40gb-pcie": A100_40_MIG,
    "a100-80gb": A100_80_MIG, "a100-80gb-pcie": A100_80_MIG,
    "h100-sxm": A100_80_MIG, "h100-pcie": A100_80_MIG,
    "h200": H200_MIG,
}

JSON_PATH = Path(reg.__file__).with_name("devices.json")


def _builtin() -> list[Device]:
    return [d for d in list_devices() if d.key in REQUIRED_KEYS]


def test_required_keys_present_in_order():
    keys = [d.key for d in list_devices()]
    for key in REQUIRED_KEYS:
        assert key in keys
    assert keys[: len(REQUIRED_KEYS)] == REQUIRED_KEYS
    assert keys[-1] == "cpu"
    assert len(keys) == len(set(keys))


def test_json_rows_have_source_no_urls_and_known_fields():
    text = JSON_PATH.read_text(encoding="utf-8")
    assert not re.search(r"https?:|www\.|\.com\b|\.org\b", text)
    doc = json.loads(text)
    rows = doc["devices"]
    names = {f.name for f in dataclasses.fields(Device)}
    for row in rows:
        assert row["key"] == row["key"].lower()
        assert set(row) <= names
        assert row["source"].strip()
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row["as_of"])


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_units_sane(key):
    d = get_device(key)
    assert d.source.strip()
    assert d.kind in ("gpu", "cpu")
    assert d.peak_fp32_tflops and d.peak_fp32_tflops > 0
    assert d.memory_gb and d.memory_gb > 0
    assert d.bandwidth_gbs and d.bandwidth_gbs > 0
    assert d.tdp_w and d.tdp_w > 0
    assert d.l2_mb and d.l2_mb > 0
    assert not d.detected
    if d.kind == "gpu":
        assert d.sm_count and d.sm_count > 0 and d.cores is None
        assert 1 < d.peak_fp32_tflops < 200  # TFLOPS, not GFLOPS
        assert 100 < d.bandwidth_gbs < 10_000  # GB/s
        assert 4 <= d.memory_gb <= 200  # GB
        for p in (d.peak_tf32_tflops, d.peak_fp16_tflops, d.peak_bf16_tflops):
            assert p is None or p >= d.peak_fp32_tflops  # tensor peaks above the FP32 peak
        assert d.peak_fp64_tflops and 0 < d.peak_fp64_tflops <= d.peak_fp32_tflops
    else:
        assert d.cores and d.cores > 0 and d.sm_count is None
        assert d.peak_fp32_tflops < 10
        assert "last-level" in d.notes and "bandwidth" in d.notes and "peak FP32" in d.notes


def test_datasheet_values():
    a = get_device("a100-40gb")
    assert a.peak_fp32_tflops == 19.5
    assert a.peak_fp16_tflops == 312
    assert a.peak_tf32_tflops == 156
    assert a.memory_gb == 40
    assert a.bandwidth_gbs == 1555
    assert a.sm_count == 108
    h = get_device("h100-sxm")
    assert h.memory_gb == 80
    assert h.bandwidth_gbs == pytest.approx(3350, rel=0.02)
    assert get_device("v100-16gb").peak_tf32_tflops is None
    assert get_device("v100-16gb").peak_bf16_tflops is None
    assert get_device("titan-xp").peak_fp16_tflops is None
    i9 = get_device("i9-10940x")
    assert i9.peak_fp32_tflops == pytest.approx(14 * 3.3 * 64 / 1000, rel=1e-3)
    assert i9.bandwidth_gbs == pytest.approx(4 * 2933 * 8 / 1000, abs=0.1)
    i7 = get_device("i7-12700h")
    assert i7.peak_fp32_tflops == pytest.approx((6 * 2.3 * 32 + 8 * 1.7 * 16) / 1000, rel=1e-3)
    assert i7.bandwidth_gbs == pytest.approx(2 * 4800 * 8 / 1000, abs=0.1)


@pytest.mark.parametrize("key", REQUIRED_KEYS)
def test_mig_profiles(key):
    assert list(get_device(key).mig_profiles) == MIG.get(key, [])


def test_lookup_case_insensitive():
    assert get_device("A100-40GB") is get_device("a100-40gb")
    assert get_device("  H100-SXM ").key == "h100-sxm"
    assert get_device("CPU") is local_cpu()


def test_unknown_key_lists_close_matches():
    with pytest.raises(PerfcastError) as exc:
        get_device("a100-40")
    msg = str(exc.value)
    assert "a100-40gb" in msg
    assert "perfcast devices" in msg
    assert "\n" not in msg
    assert get_device("rtx-4090").key == "rtx4090"  # punctuation aside, the key itself
    with pytest.raises(PerfcastError, match="perfcast devices"):
        get_device("no-such-thing-at-all")


def test_peak_tflops_precisions_and_fallback():
    a = get_device("a100-40gb")
    assert a.peak_tflops("fp32") == 19.5
    assert a.peak_tflops("tf32") == 156
    assert a.peak_tflops("fp16") == a.peak_tflops("amp") == 312
    assert a.peak_tflops("BF16") == 312
    v = get_device("v100-32gb")
    assert v.peak_tflops("tf32") == v.peak_fp32_tflops
    assert v.peak_tflops("bf16") == v.peak_fp32_tflops
    assert v.peak_tflops("amp") == 125
    x = get_device("titan-xp")
    assert x.peak_tflops("fp16") == x.peak_fp32_tflops
    with pytest.raises(PerfcastError, match="fp32"):
        a.peak_tflops("int8")


def test_to_dict_round_trip():
    for d in list_devices():
        row = d.to_dict()
        json.dumps(row)
        assert isinstance(row["mig_profiles"], list)
        assert Device.from_dict(row) == d


def test_device_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_device("t4").memory_gb = 1  # type: ignore[misc]


def test_local_cpu_detected():
    cpu = local_cpu()
    assert cpu is local_cpu()  # cached
    assert cpu.key == "cpu" and cpu.kind == "cpu" and cpu.detected
    assert cpu.name
    assert cpu.cores and cpu.cores >= 1
    assert cpu.peak_fp32_tflops and cpu.peak_fp32_tflops > 0
    assert cpu.bandwidth_gbs is None and cpu.tdp_w is None
    assert "estimate" in cpu.notes.lower()
    assert list_devices()[-1] is cpu


def test_local_cpu_without_proc_or_sys(tmp_path):
    cpu = detect._detect_cpu(proc_root=tmp_path / "proc", sys_root=tmp_path / "sys")
    assert cpu.detected and cpu.key == "cpu"
    assert cpu.name
    assert cpu.l2_mb is None
    assert cpu.peak_fp32_tflops and cpu.peak_fp32_tflops > 0


def test_local_cpu_from_fake_files(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Fake Xeon\n"
        "cpu MHz\t\t: 1000.000\nflags\t\t: fpu sse avx avx2 fma\n\n"
        "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Fake Xeon\n"
    )
    sysfs = tmp_path / "sys"
    cpu0 = sysfs / "devices/system/cpu/cpu0"
    (cpu0 / "cpufreq").mkdir(parents=True)
    (cpu0 / "cpufreq/cpuinfo_max_freq").write_text("3000000\n")
    for idx, (level, size) in enumerate([(1, "48K"), (1, "32K"), (2, "1280K"), (3, "30720K")]):
        d = cpu0 / f"cache/index{idx}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    cpu = detect._detect_cpu(proc_root=proc, sys_root=sysfs)
    assert cpu.name == "Fake Xeon" and cpu.vendor == "Intel"
    assert cpu.l2_mb == pytest.approx(30.0)
    assert cpu.peak_fp32_tflops == pytest.approx(cpu.cores * 3.0 * 32 / 1000, rel=1e-3)
    assert "32 FLOPs/cycle" in cpu.notes


def test_register_device():
    dev = Device(
        key="Test-Accel", name="Test Accelerator", kind="gpu", vendor="Acme", architecture="X1",
        peak_fp32_tflops=10.0, memory_gb=16, bandwidth_gbs=500, sm_count=20, source="unit test",
    )
    try:
        register_device(dev)
        assert get_device("test-accel") is dev
        keys = [d.key for d in list_devices()]
        assert keys.index("test-accel") > keys.index("i7-12700h")
        assert keys[-1] == "cpu"
        with pytest.raises(PerfcastError, match="already registered"):
            register_device(dev)
        replacement = dataclasses.replace(dev, peak_fp32_tflops=11.0)
        register_device(replacement, replace=True)
        assert get_device("test-accel").peak_fp32_tflops == 11.0
        with pytest.raises(PerfcastError, match="reserved"):
            register_device(dataclasses.replace(dev, key="cpu"))
        with pytest.raises(PerfcastError):
            register_device({"key": "nope"})  # type: ignore[arg-type]
    finally:
        unregister_device("test-accel")
    with pytest.raises(PerfcastError):
        get_device("test-accel")


def test_invalid_device_rejected():
    with pytest.raises(PerfcastError, match="kind"):
        Device(key="x", name="x", kind="tpu", vendor="v", architecture="a", peak_fp32_tflops=1)
    with pytest.raises(PerfcastError, match="peak_fp32_tflops"):
        Device(key="x", name="x", kind="gpu", vendor="v", architecture="a", peak_fp32_tflops=-1)
    with pytest.raises(PerfcastError, match="unknown field"):
        Device.from_dict({"key": "x", "bogus": 1})


# --------------------------------------------------------------------------- generation features
@pytest.mark.parametrize("key", GPU_KEYS)
def test_gpu_generation_fields(key):
    d = get_device(key)
    if d.vendor == "NVIDIA":
        assert re.fullmatch(r"\d\.\d", d.compute_capability)
    elif d.vendor == "AMD":
        assert re.fullmatch(r"gfx9[0-9a-f]{2}", d.compute_capability)
    else:  # Intel publishes no compute capability / gfx-like target
        assert d.vendor == "Intel" and d.compute_capability is None
    assert 2016 <= d.arch_year <= 2023
    assert d.fp32_cores_per_sm in (64, 128)
    assert 1000 <= d.boost_clock_mhz <= 2600
    # the FP32 peak is SMs x cores/SM x 2 (FMA) x boost clock: the numbers hang together
    peak = d.sm_count * d.fp32_cores_per_sm * 2 * d.boost_clock_mhz / 1e6
    assert peak == pytest.approx(d.peak_fp32_tflops, rel=0.03), key
    assert "compute capability" in d.source or "gfx target" in d.source or d.vendor == "Intel"


def test_generations_order_and_precisions():
    years = {k: get_device(k).arch_year for k in ("p100-16gb-pcie", "v100-32gb-pcie", "t4",
                                                  "a100-40gb", "rtx4090", "h100-sxm", "mi100",
                                                  "mi250")}
    assert years["p100-16gb-pcie"] < years["v100-32gb-pcie"] < years["t4"] < years["a100-40gb"]
    assert years["a100-40gb"] <= years["rtx4090"] == years["h100-sxm"] == 2022
    assert years["mi100"] == 2020 and years["mi250"] == 2021
    assert get_device("a100-40gb").compute_capability == "8.0"
    assert get_device("mi210").compute_capability == get_device("mi250").compute_capability == "gfx90a"
    assert get_device("mi100").compute_capability == "gfx908"
    # no TF32 before Ampere (nor on CDNA 1/2); P100's FP16 is native half2 at 2x FP32
    for key in ("p4", "p100-16gb-pcie", "v100-32gb-pcie", "t4", "titan-rtx", "mi100", "mi210", "mi250"):
        assert get_device(key).peak_tf32_tflops is None, key
    p100 = get_device("p100-16gb-pcie")
    assert p100.peak_fp16_tflops == pytest.approx(2 * p100.peak_fp32_tflops, rel=0.01)
    assert "no tensor cores" in p100.notes
    assert get_device("p4").peak_fp16_tflops is None
    assert get_device("v100-32gb-pcie").peak_fp16_tflops == 112
    assert get_device("a100-40gb").peak_tflops("fp64") == 9.7
    assert get_device("h100-sxm").peak_fp64_tflops == 34
    assert get_device("i9-10940x").peak_tflops("fp64") is None  # no fallback to FP32 for FP64
    for d in list_devices():
        if d.kind == "cpu":
            assert d.compute_capability is None and d.arch_year is None
            assert d.boost_clock_mhz is None and d.fp32_cores_per_sm is None


def test_mi250_is_one_gcd():
    d = get_device("mi250")
    assert "GCD" in d.name and "one PyTorch device" in d.notes
    assert (d.sm_count, d.memory_gb, d.bandwidth_gbs) == (104, 64, 1638.4)  # half the package
    assert "208 CUs" in d.notes and "128 GB" in d.notes  # the package figures, for reference


def test_units_block_documents_every_numeric_field():
    units = json.loads(JSON_PATH.read_text(encoding="utf-8"))["units"]
    for name in ("peak_fp64_tflops", "compute_capability", "arch_year", "boost_clock_mhz",
                 "fp32_cores_per_sm", "peak_tf32_tflops", "peak_fp16_tflops", "sm_count"):
        assert units[name].strip(), name


NEUSIGHT_CONFIGS = {  # NeuSight's device_configs file → registry key
    "NVIDIA_A100-PCIE-40GB": "a100-40gb-pcie", "NVIDIA_A100_80GB_PCIe": "a100-80gb-pcie",
    "NVIDIA_A100-SXM4-40GB": "a100-40gb", "NVIDIA_H100_80GB_HBM3": "h100-sxm", "NVIDIA_L4": "l4",
    "Tesla_P100-PCIE-16GB": "p100-16gb-pcie", "Tesla_P4": "p4", "Tesla_T4": "t4",
    "Tesla_V100-PCIE-32GB": "v100-32gb-pcie",
}


@pytest.mark.shared_data("neusight/device_configs/NVIDIA_L4.json")
def test_rows_checked_against_neusight_device_configs():
    """Every registry row NeuSight has a record of agrees with it, or says in notes where
    (and that the datasheet was kept)."""
    from perfcast.paths import public_data_dir

    folder = public_data_dir() / "neusight" / "device_configs"
    for stem, key in NEUSIGHT_CONFIGS.items():
        cfg = json.loads((folder / f"{stem}.json").read_text())
        d = get_device(key)
        ours = {"Dev_Mem": d.memory_gb, "Mem_Bw": d.bandwidth_gbs, "Num_Sm": d.sm_count,
                "Core_Per_SM": d.fp32_cores_per_sm, "Freq": d.boost_clock_mhz,
                "SingleFLOPs": d.peak_fp32_tflops * 1000, "L2Cache": d.l2_mb}
        off = [k for k, v in ours.items() if v != pytest.approx(cfg[k], rel=0.025)]
        if off and key not in ("a100-40gb", "h100-sxm"):  # the two have no NeuSight labels
            assert "NeuSight" in d.notes and "datasheet" in d.notes, (key, off)
    # the disagreements documented in the rows
    assert "58" in get_device("l4").notes and "60" in get_device("l4").notes
    assert "15 GB" in get_device("t4").notes
    assert get_device("l4").sm_count == 58 and get_device("t4").memory_gb == 16


# --------------------------------------------------------------------------- validation
GOOD_SPEC = {
    "key": "lab-gpu", "name": "Lab GPU", "kind": "gpu", "vendor": "NVIDIA",
    "architecture": "Ampere", "peak_fp32_tflops": 20.0, "peak_fp16_tflops": 80.0,
    "memory_gb": 24, "bandwidth_gbs": 768, "sm_count": 84, "compute_capability": "8.6",
    "arch_year": 2020,
}


@pytest.fixture(autouse=True)
def _user_devices(tmp_path_factory, monkeypatch):
    """Every test gets its own (empty) user-devices directory."""
    folder = tmp_path_factory.mktemp("user-devices")
    monkeypatch.setenv("PERFCAST_DEVICES_DIR", str(folder))
    yield folder


def _write(folder: Path, name: str, row: dict) -> Path:
    path = folder / name
    path.write_text(json.dumps(row))
    return path


@pytest.mark.parametrize("change,needle", [
    ({"bandwidth_gbs": 0}, "bandwidth_gbs must be > 0 GB/s, got 0"),
    ({"bandwidth_gbs": -5}, "bandwidth_gbs must be > 0 GB/s"),
    ({"peak_fp32_tflops": None}, "missing peak_fp32_tflops"),
    ({"peak_fp16_tflops": -1}, "peak_fp16_tflops must be > 0 TFLOPS"),
    ({"memory_gb": "24GB"}, "memory_gb must be a number"),
    ({"memory_gb": True}, "memory_gb must be a number"),
    ({"sm_count": 84.5}, "sm_count must be a whole number"),
    ({"peak_fp32_tflops": 19492}, "GFLOPS"),
    ({"kind": "tpu"}, "kind must be one of"),
    ({"compute_capability": 8.6}, "compute_capability"),
    ({"arch_year": 20}, "arch_year"),
    ({"mig_profiles": "1g.5gb"}, "mig_profiles"),
    ({"as_of": "yesterday"}, "as_of"),
    ({"name": ""}, "name is required"),
    ({"key": "my gpu"}, "key may hold only"),
    ({"bandwith_gbs": 700}, "unknown field(s) bandwith_gbs (did you mean bandwidth_gbs?)"),
])
def test_spec_validation_names_file_and_key(tmp_path, change, needle):
    row = {**GOOD_SPEC, **change}
    row = {k: v for k, v in row.items() if not (k == "peak_fp32_tflops" and v is None)}
    path = _write(tmp_path, "my.json", row)
    with pytest.raises(PerfcastError) as exc:
        get_device(str(path))
    msg = str(exc.value)
    assert needle in msg and msg.startswith(f"{path}: ") and "\n" not in msg
    if change != {"key": "my gpu"}:
        assert f"'{row['key']}'" in msg
    assert "lab-gpu" not in reg.device_keys()


def test_required_fields_per_kind():
    for field in ("peak_fp32_tflops", "memory_gb", "bandwidth_gbs", "sm_count"):
        row = {k: v for k, v in GOOD_SPEC.items() if k != field}
        with pytest.raises(PerfcastError, match=f"missing {field}"):
            Device.from_dict(row)
    cpu = Device(key="my-cpu", name="My CPU", kind="cpu", peak_fp32_tflops=1.0, cores=8)
    assert cpu.bandwidth_gbs is None  # optional for a CPU (the detected one has none)
    with pytest.raises(PerfcastError, match="missing cores"):
        Device(key="my-cpu", name="My CPU", kind="cpu", peak_fp32_tflops=1.0)
    with pytest.raises(PerfcastError, match="device row: missing key"):
        Device.from_dict({k: v for k, v in GOOD_SPEC.items() if k != "key"})


def test_builtin_rows_pass_validation():
    rows = json.loads(JSON_PATH.read_text(encoding="utf-8"))["devices"]
    for row in rows:  # every row is valid and round-trips unchanged (40 == 40.0)
        assert Device.from_dict(row).to_dict() == {**row, "detected": False}


# --------------------------------------------------------------------------- spec files
def test_spec_file_is_a_device(tmp_path):
    path = _write(tmp_path, "lab.json", GOOD_SPEC)
    try:
        d = get_device(str(path))
        assert d.key == "lab-gpu" and d.bandwidth_gbs == 768 and d.compute_capability == "8.6"
        assert get_device(path) is d and get_device(str(path)) is d  # registered once
        assert get_device("lab-gpu") is d and "lab-gpu" in reg.device_keys()
        assert reg.device_origin("lab-gpu").startswith("spec file")
    finally:
        unregister_device("lab-gpu")


def test_spec_key_from_file_name(tmp_path):
    path = _write(tmp_path, "My GPU_v2.json", {k: v for k, v in GOOD_SPEC.items() if k != "key"})
    try:
        assert get_device(str(path)).key == "my-gpu_v2"
    finally:
        unregister_device("my-gpu_v2")


def test_spec_may_not_take_a_registry_key(tmp_path):
    path = _write(tmp_path, "t4.json", {**GOOD_SPEC, "key": "t4"})
    with pytest.raises(PerfcastError, match=r"'t4' is already taken \(built-in\)") as exc:
        get_device(str(path))
    assert "--replace" in str(exc.value)
    assert get_device("t4").name == "NVIDIA T4"
    same = _write(tmp_path, "same.json", get_device("t4").to_dict())
    assert get_device(str(same)) is get_device("t4")  # the identical row is no conflict


def test_registry_key_wins_over_a_file_of_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, "t4", {**GOOD_SPEC, "key": "other"})
    assert get_device("t4").name == "NVIDIA T4"
    _write(tmp_path, "lab", GOOD_SPEC)  # not a key: an existing file is read as a spec
    try:
        assert get_device("lab").key == "lab-gpu"
    finally:
        unregister_device("lab-gpu")


def test_missing_and_broken_spec_files(tmp_path):
    with pytest.raises(PerfcastError, match="device spec file not found: nope.json"):
        get_device("nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PerfcastError, match="not valid JSON"):
        get_device(str(bad))
    arr = _write(tmp_path, "arr.json", [GOOD_SPEC])  # type: ignore[arg-type]
    with pytest.raises(PerfcastError, match="one JSON object"):
        get_device(str(arr))
    with pytest.raises(PerfcastError, match="reserved"):
        get_device(str(_write(tmp_path, "c.json", {**GOOD_SPEC, "key": "cpu"})))


# --------------------------------------------------------------------------- user devices
def test_add_list_use_remove_user_device(tmp_path, monkeypatch, _user_devices):
    spec = _write(tmp_path, "lab.json", GOOD_SPEC)
    dev, path = reg.add_user_device(spec)
    assert path == _user_devices / "lab-gpu.json" and path.is_file()
    assert get_device("lab-gpu") == dev and reg.user_devices() == {"lab-gpu": path}
    keys = reg.device_keys()
    assert keys.index("lab-gpu") > keys.index("i7-12700h") and keys[-1] == "cpu"
    with pytest.raises(PerfcastError, match="already a user device"):
        reg.add_user_device(spec)
    reg.add_user_device(_write(tmp_path, "lab2.json", {**GOOD_SPEC, "memory_gb": 48}), replace=True)
    assert get_device("lab-gpu").memory_gb == 48
    # loaded on first use in a fresh registry (another process): simulate by switching dirs
    other = tmp_path / "elsewhere"
    monkeypatch.setenv("PERFCAST_DEVICES_DIR", str(other))
    assert "lab-gpu" not in reg.device_keys()
    monkeypatch.setenv("PERFCAST_DEVICES_DIR", str(_user_devices))
    assert get_device("lab-gpu").memory_gb == 48
    assert reg.remove_user_device("LAB-GPU") == [path] and not path.exists()
    with pytest.raises(PerfcastError, match="unknown device"):
        get_device("lab-gpu")
    with pytest.raises(PerfcastError, match="no user device 'lab-gpu'"):
        reg.remove_user_device("lab-gpu")
    with pytest.raises(PerfcastError, match="built-in device; only user devices"):
        reg.remove_user_device("a100-40gb")


def test_user_device_overrides_builtin_only_with_replace(tmp_path):
    spec = _write(tmp_path, "t4.json", {**get_device("t4").to_dict(), "bandwidth_gbs": 300.0})
    with pytest.raises(PerfcastError, match="'t4' is a built-in device; pass --replace"):
        reg.add_user_device(spec)
    reg.add_user_device(spec, replace=True)
    assert get_device("t4").bandwidth_gbs == 300
    assert reg.device_keys().index("t4") == REQUIRED_KEYS.index("t4")  # keeps its place
    reg.remove_user_device("t4")
    assert get_device("t4").bandwidth_gbs == 320  # the built-in is back


def test_broken_user_device_file_is_one_line_error(_user_devices):
    (_user_devices / "oops.json").write_text(json.dumps({**GOOD_SPEC, "key": "oops",
                                                         "bandwidth_gbs": 0}))
    with pytest.raises(PerfcastError) as exc:
        get_device("t4")
    msg = str(exc.value)
    assert str(_user_devices / "oops.json") in msg and "'oops'" in msg and "\n" not in msg
    assert reg.remove_user_device("oops")  # remove works although the file is broken
    assert get_device("t4").key == "t4"


def test_paths_user_devices_dir(tmp_path, monkeypatch):
    from perfcast import paths

    monkeypatch.delenv("PERFCAST_DEVICES_DIR")
    monkeypatch.setenv("PERFCAST_DATA_HOME", str(tmp_path / "home"))
    assert paths.user_devices_dir() == tmp_path / "home" / "devices"
    monkeypatch.setenv("PERFCAST_DEVICES_DIR", str(tmp_path / "mine"))
    assert paths.user_devices_dir() == tmp_path / "mine"


# --------------------------------------------------------------------------- the CLI
def _main(args, capsys):
    from perfcast.faces.cli import main

    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err.strip()


def test_cli_devices_lists_as_before(capsys):
    code, out, _ = _main(["devices", "--json"], capsys)
    assert code == 0
    rows = json.loads(out)
    # spec files other tests of the session passed as --device stay registered (by design)
    from perfcast.devices import device_origin

    keys = [r["key"] for r in rows if not device_origin(r["key"]).startswith("spec file")]
    assert keys == [*REQUIRED_KEYS, *ADDED_GPU_KEYS, "cpu"]
    code, out, _ = _main(["devices"], capsys)
    assert code == 0
    assert out.lstrip().startswith("devices") and "key" in out  # the table (wrapped to the terminal)
    assert "mi250" in out and "a100-40gb" in out


def test_cli_devices_add_remove(tmp_path, capsys, _user_devices):
    spec = _write(tmp_path, "lab.json", GOOD_SPEC)
    code, out, err = _main(["devices", "add", str(spec)], capsys)
    assert code == 0, err
    assert "lab-gpu" in out and (_user_devices / "lab-gpu.json").is_file()
    code, _, err = _main(["devices", "add", str(spec)], capsys)
    assert code == 2 and "--replace" in err and len(err.splitlines()) == 1
    assert _main(["devices", "add", str(spec), "--replace"], capsys)[0] == 0
    code, out, _ = _main(["devices", "--json"], capsys)
    assert "lab-gpu" in [r["key"] for r in json.loads(out)]
    code, _, err = _main(["devices", "remove", "a100-40gb"], capsys)
    assert code == 2 and "built-in" in err
    code, out, _ = _main(["devices", "remove", "lab-gpu"], capsys)
    assert code == 0 and not (_user_devices / "lab-gpu.json").exists()


@pytest.mark.parametrize("change,needle", [
    ({"bandwidth_gbs": 0}, "bandwidth_gbs must be > 0"),
    ({"peak_fp32_tflops": None}, "missing peak_fp32_tflops"),
])
def test_cli_bad_spec_exit_2_names_key_and_file(tmp_path, capsys, change, needle):
    row = {k: v for k, v in {**GOOD_SPEC, **change}.items() if v is not None}
    spec = _write(tmp_path, "my.json", row)
    for args in (["devices", "add", str(spec)],
                 ["cost", "--device", str(spec), "--time-ms", "10", "--iterations", "5"]):
        code, _, err = _main(args, capsys)
        assert code == 2, err
        assert err.startswith("error:") and needle in err and "'lab-gpu'" in err
        assert "my.json" in err and len(err.splitlines()) == 1


def test_cli_device_spec_on_a_command(tmp_path, capsys):
    spec = _write(tmp_path, "lab.json", {**GOOD_SPEC, "tdp_w": 300})
    try:
        code, out, err = _main(["cost", "--device", str(spec), "--time-ms", "100",
                                "--iterations", "36000", "--json"], capsys)
        assert code == 0, err
        d = json.loads(out)
        assert d["device"] == "lab-gpu" and d["hours"] == pytest.approx(1.0)
    finally:
        unregister_device("lab-gpu")


def test_a_gpu_by_the_name_drivers_and_benchmarks_print():
    """`--device` takes a registry key, or the product name nvidia-smi, NeuSight or ML.ENERGY
    print for it (vendor words, punctuation and case aside); an ambiguous or unknown name stays
    a one-line error that lists the candidates — never a guess."""
    from perfcast.devices import get_device
    from perfcast.errors import PerfcastError

    for name, key in [("NVIDIA H100 80GB HBM3", "h100-sxm"), ("H100 SXM", "h100-sxm"),
                      ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("A100 80GB PCIe", "a100-80gb-pcie"),
                      ("Tesla V100-PCIE-32GB", "v100-32gb-pcie"), ("NVIDIA GeForce RTX 4090",
                                                                    "rtx4090"),
                      ("Tesla T4", "t4"), ("AMD Instinct MI300X", "mi300x"),
                      ("Intel Data Center GPU Max 1550", "max1550"), ("NVIDIA B200", "b200")]:
        assert get_device(name).key == key, name
    for name, candidates in [("H100", "h100-sxm, h100-pcie"), ("A100", "a100-40gb, a100-80gb")]:
        with pytest.raises(PerfcastError, match=candidates):
            get_device(name)
    with pytest.raises(PerfcastError, match="unknown device 'H100 NVL'"):
        get_device("H100 NVL")
