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
from perfcast.devices import registry as reg
from perfcast.errors import PerfcastError

REQUIRED_KEYS = [
    "a100-40gb", "a100-80gb", "a100-40gb-pcie", "a100-80gb-pcie", "h100-sxm", "h100-pcie",
    "h200", "v100-16gb", "v100-32gb", "t4", "l4", "a10", "rtx3090", "rtx4090", "rtx2080ti",
    "titan-rtx", "titan-xp", "i9-10940x", "i7-12700h",
]

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
    with pytest.raises(PerfcastError, match="rtx4090"):
        get_device("rtx-4090")
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
    cpu = reg._detect_cpu(proc_root=tmp_path / "proc", sys_root=tmp_path / "sys")
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
    cpu = reg._detect_cpu(proc_root=proc, sys_root=sysfs)
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
