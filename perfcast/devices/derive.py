"""Spec fields derived from other fields, each by a stated rule — never silently defaulted.

A GPU given by its spec sheet often leaves fields out: the compute capability, the TF32 or
bf16 tensor peak, the cores per SM, the clock. A model that needs one gets it here, from the
fields the spec does give, together with the sentence saying how (:func:`complete`), which the
prediction repeats in its ``notes`` (:func:`notes_for`: the derivations of the fields a path
reads). Where no rule applies the field stays unknown and the caller says so or refuses.

Rules (first that applies; the "chip" is read off the ``architecture`` text and the ``name``
by :data:`CHIPS` — die names such as "GA100" or "AD102" first, then product names such as
"A100", "RTX 4090", "MI250", then architecture names such as "Hopper"):

* ``compute_capability``: the chip's (:data:`CHIPS`) — NVIDIA Kepler GK110 3.5 / GK210 3.7,
  Maxwell 5.2, Pascal GP100 6.0 / GP10x 6.1, Volta 7.0, Turing 7.5, Ampere GA100 (A100, A30,
  A800) 8.0 / GA10x (every other Ampere product) 8.6, Ada 8.9, Hopper 9.0, Blackwell
  data-centre B100 / B200 / GB200 10.0, B300 / GB300 10.3, GeForce RTX 50 / RTX PRO
  Blackwell (GB20x) 12.0, GB10 12.1; a "Blackwell" spec naming neither chip nor product: 10.0
  when its FP16 tensor peak is ≥ 8× the FP32 one (the data-centre parts: B200 30×), else 12.0
  (GeForce / RTX PRO: 2–4×). AMD: the LLVM gfx target of the CDNA generation — CDNA gfx908,
  CDNA 2 gfx90a, CDNA 3 gfx942, CDNA 4 gfx950 (RDNA and Intel: none, no model needs it).
* ``arch_year``: the architecture's first launch year from the compute capability (given or
  derived; :data:`YEAR_BY_COMPUTE_CAPABILITY`, NVIDIA "8.9", AMD "gfx90a"), else from the
  ``architecture`` text or the ``name`` (:data:`ARCHITECTURE_PATTERNS`).
* ``fp32_cores_per_sm``: the chip's FP32 lanes per SM / CU — 192 Kepler; 128 Maxwell, Pascal
  GP10x, Ampere GA10x, Ada, Hopper, Blackwell; 64 Pascal GP100, Volta, Turing, Ampere GA100;
  AMD 64 per CU on CDNA 1/2, 128 on CDNA 3/4 (packed FP32); Intel Xe-HPC 128 per Xe core.
* ``boost_clock_mhz``: from the FP32 peak = 2 (FMA) × SMs × FP32 cores per SM × clock, with
  the cores per SM given or derived (every row of ``devices.json`` agrees within 3 %).
  (``sm_count`` is required of a GPU spec, so it is never derived.)
* ``peak_tf32_tflops``: NVIDIA Ampere and newer (compute capability ≥ 8.0, or an
  Ampere-or-later architecture by name), AMD CDNA 3 and Intel Xe-HPC run TF32 (XF32) on the
  tensor / matrix cores at half the dense FP16 rate (A100 156 of 312, H100 SXM 494.7 of 989.4,
  RTX 4090 82.6 of 165.2, MI300X 653.7 of 1307.4, Max 1550 419.4 of 838.9 TFLOPS — every
  datasheet in ``devices.json``).
* ``peak_bf16_tflops``: the FP16 tensor peak on NVIDIA Ampere and newer, AMD CDNA 2 and newer,
  Intel Xe-HPC (bf16 and fp16 share the units there); half of it on AMD CDNA 1 (MI100: 92.3 of
  184.6).
* ``peak_fp8_tflops``: twice the dense FP16 tensor peak on NVIDIA Ada, Hopper and Blackwell
  (compute capability ≥ 8.9, or one of those architectures by name) and AMD CDNA 3 / 4 (FP8
  runs on the same tensor / matrix cores at twice the FP16 rate: H100 SXM 1,978.9 of 989.4,
  L40S 733 of 362, RTX 4090 330.3 of 165.2 with FP32 accumulate, MI300X 2,614.9 of 1,307.4 —
  every datasheet in ``devices.json``). None on Ampere and older, AMD CDNA 1 / 2 and Intel
  Xe-HPC: they have no FP8 units (:mod:`perfcast.devices.fp8` then refuses FP8).
* ``peak_fp64_tflops`` (vector FP64): the FP32 peak × the chip's FP64:FP32 rate — ½ on the
  data-centre dies (GP100, GV100, GA100, GH100, B100 / B200, CDNA 1/3/4), 1 on CDNA 2 and
  Xe-HPC, 1/32 on Maxwell, Pascal GP10x and Turing, 1/64 on Ampere GA10x, Ada and GeForce /
  RTX PRO Blackwell, ⅓ on Kepler (the architecture whitepapers; ``devices.json``'s
  convention where a datasheet gives none). No prediction reads it.

``l2_mb`` has no rule: a product's L2 is not its die's (the RTX 4090 enables 72 of AD102's
96 MB), so an unknown L2 stays unknown — the readers treat it as no cache (the time lower
bound, :func:`perfcast.predictors.roofline.time_lower_bound_ms`) or a missing value (the LLM
power model). Nothing is derived for a CPU.
"""

from __future__ import annotations

import dataclasses
import functools
import re

#: First launch year of an architecture by compute capability (NVIDIA major.minor; AMD gfx).
YEAR_BY_COMPUTE_CAPABILITY: dict[str, int] = {
    "3.0": 2012, "3.5": 2013, "3.7": 2014, "5.0": 2014, "5.2": 2014, "5.3": 2015,
    "6.0": 2016, "6.1": 2016, "6.2": 2016, "7.0": 2017, "7.2": 2018, "7.5": 2018,
    "8.0": 2020, "8.6": 2020, "8.7": 2022, "8.9": 2022, "9.0": 2022, "10.0": 2024,
    "10.1": 2025, "10.3": 2025, "11.0": 2025, "12.0": 2025, "12.1": 2025,
    "gfx906": 2018, "gfx908": 2020, "gfx90a": 2021, "gfx940": 2023, "gfx941": 2023,
    "gfx942": 2023, "gfx950": 2025, "gfx1100": 2022, "gfx1030": 2020,
}
#: (regular expression over the lower-cased architecture text and name, architecture, year,
#: NVIDIA Ampere-or-later) — the first match wins; architecture names come before product names.
ARCHITECTURE_PATTERNS: tuple[tuple[str, str, int, bool], ...] = (
    (r"blackwell|\bgb?[12]00\b|\bb[12]00\b|rtx 50\d0|rtx pro 6000", "Blackwell", 2024, True),
    (r"hopper|\bg?h[12]00\b|\bh800\b|\bh20\b", "Hopper", 2022, True),
    (r"ada|rtx 40\d0|\bl4\b|\bl40s?\b|rtx 6000 ada", "Ada Lovelace", 2022, True),
    (r"ampere|\ba100\b|\ba10g?\b|\ba30\b|\ba40\b|rtx 30\d0|rtx a\d000|\ba\d000\b", "Ampere",
     2020, True),
    (r"turing|\bt4\b|rtx 20\d0|titan rtx|quadro rtx", "Turing", 2018, False),
    (r"volta|\bv100\b|titan v\b", "Volta", 2017, False),
    (r"pascal|\bp100\b|\bp40\b|\bp4\b|titan xp?\b|gtx 10\d0", "Pascal", 2016, False),
    (r"maxwell|\bm40\b|\bm60\b|gtx 9\d0", "Maxwell", 2014, False),
    (r"kepler|\bk80\b|\bk40\b", "Kepler", 2012, False),
    (r"cdna ?4|mi35\dx?", "CDNA 4", 2025, False),
    (r"cdna ?3|mi3\d\dx?|mi300a?", "CDNA 3", 2023, False),
    (r"cdna ?2|aldebaran|mi2[15]0x?", "CDNA 2", 2021, False),
    (r"cdna|arcturus|mi100", "CDNA", 2020, False),
    (r"rdna ?3|rx 7\d00", "RDNA 3", 2022, False),
    (r"rdna ?2|rx 6\d00", "RDNA 2", 2020, False),
    (r"xe-hpc|ponte vecchio|max 1[15]\d0", "Xe-HPC", 2023, False),
)


@dataclasses.dataclass(frozen=True)
class Chip:
    """What a GPU die (or product family) fixes: its compute capability (``None``: none to
    give), FP32 lanes per SM / CU and vector FP64:FP32 rate (``None``: no rule)."""

    pattern: str  # regular expression over the lower-cased "architecture | name"
    chip: str  # how the rule names it in notes
    compute_capability: str | None
    fp32_cores_per_sm: int | None
    fp64_per_fp32: float | None


#: Chips by die, product and architecture name — the first match wins, so die and product
#: names come before the architecture words they share ("Ampere (GA100)" is GA100).
CHIPS: tuple[Chip, ...] = (
    # NVIDIA Blackwell: data-centre dies, then GeForce / RTX PRO (GB20x), then GB10
    Chip(r"\bg?b300\b", "Blackwell B300", "10.3", 128, None),
    Chip(r"\bgb?[12]00\b|\bb[12]00\b", "Blackwell data-centre (B100 / B200 / GB200)", "10.0",
         128, 1 / 2),
    Chip(r"\bgb20\d\b|rtx 50\d0|rtx pro \d+", "Blackwell GeForce / RTX PRO (GB20x)", "12.0",
         128, 1 / 64),
    Chip(r"\bgb10\b", "Blackwell GB10", "12.1", 128, None),
    # Hopper, Ada, Ampere
    Chip(r"\bgh100\b|\bg?h[12]00\b|\bh800\b|\bh20\b|hopper", "Hopper GH100", "9.0", 128,
         1 / 2),
    Chip(r"\bad10\d\b|rtx 40\d0|\bl4\b|\bl40s?\b|\bl20\b|rtx \d000 ada|\bada\b|lovelace",
         "Ada (AD10x)", "8.9", 128, 1 / 64),
    Chip(r"\bga100\b|\ba100\b|\ba30\b|\ba800\b", "Ampere GA100", "8.0", 64, 1 / 2),
    Chip(r"\bga10[2-7]\b|\ba10g?\b|\ba40\b|\ba16\b|\ba2\b|rtx 30\d0|rtx a\d000|\ba\d000\b"
         r"|ampere", "Ampere GA10x", "8.6", 128, 1 / 64),
    # Turing, Volta, Pascal, Maxwell, Kepler
    Chip(r"\btu10\d\b|turing|\bt4\b|rtx 20\d0|titan rtx|quadro rtx|gtx 16\d0", "Turing",
         "7.5", 64, 1 / 32),
    Chip(r"\bgv100\b|volta|\bv100\b|titan v\b", "Volta GV100", "7.0", 64, 1 / 2),
    Chip(r"\bgp100\b|\bp100\b", "Pascal GP100", "6.0", 64, 1 / 2),
    Chip(r"\bgp10[2-8]\b|pascal|\bp40\b|\bp4\b|titan xp?\b|gtx 10\d0", "Pascal GP10x", "6.1",
         128, 1 / 32),
    Chip(r"\bgm20\d\b|maxwell|\bm40\b|\bm60\b|gtx 9\d0", "Maxwell GM20x", "5.2", 128, 1 / 32),
    Chip(r"\bgk210\b|\bk80\b", "Kepler GK210", "3.7", 192, 1 / 3),
    Chip(r"\bgk110b?\b|\bk40\b|kepler", "Kepler GK110", "3.5", 192, 1 / 3),
    # AMD Instinct by CDNA generation, Intel Xe-HPC
    Chip(r"cdna ?4|mi35\dx?", "AMD CDNA 4", "gfx950", 128, 1 / 2),
    Chip(r"cdna ?3|mi3\d\dx?|mi300a?", "AMD CDNA 3", "gfx942", 128, 1 / 2),
    Chip(r"cdna ?2|aldebaran|mi2[15]0x?", "AMD CDNA 2", "gfx90a", 64, 1.0),
    Chip(r"cdna|arcturus|mi100", "AMD CDNA", "gfx908", 64, 1 / 2),
    Chip(r"xe-hpc|ponte vecchio|max 1[15]\d0", "Intel Xe-HPC", None, 128, 1.0),
)
#: A Blackwell spec that names neither chip nor product: data-centre (10.0) when its FP16
#: tensor peak is at least this many times the FP32 one, else GeForce / RTX PRO (12.0).
BLACKWELL_DATACENTRE_TENSOR_RATIO = 8.0


@dataclasses.dataclass(frozen=True)
class Derivation:
    """One derived field: its name, value and the rule that gave it."""

    field: str
    value: float | int | str
    rule: str

    def note(self, key: str) -> str:
        v = self.value if isinstance(self.value, str) else f"{self.value:g}"
        return f"device {key}: {self.field} = {v} derived ({self.rule})"


def _text(device) -> str:
    return f"{device.architecture or ''} | {device.name or ''}".lower()


def _architecture(device) -> tuple[str, int, bool] | None:
    """``(architecture, year, nvidia_ampere_or_later)`` from the architecture text and name."""
    text = _text(device)
    for pattern, arch, year, ampere in ARCHITECTURE_PATTERNS:
        if re.search(pattern, text):
            return arch, year, ampere
    return None


def _vendor(device) -> str:
    return str(device.vendor or "").strip().lower()


def _is_nvidia(device) -> bool:
    """NVIDIA by the vendor, else (no vendor) by a CUDA compute capability, given or of the
    chip the name / architecture names."""
    if _vendor(device):
        return _vendor(device) == "nvidia"
    c = chip(device)
    cc = str(device.compute_capability or (c.compute_capability if c else "") or "")
    return bool(re.fullmatch(r"\d+\.\d+", cc))


def chip(device) -> Chip | None:
    """The :data:`CHIPS` rule of a GPU's architecture text and name (``None``: none matches,
    or the vendor says otherwise — an NVIDIA spec never takes an AMD / Intel rule)."""
    if not getattr(device, "is_gpu", False):
        return None
    text, vendor = _text(device), _vendor(device)
    for c in CHIPS:
        amd_or_intel = c.chip.startswith(("AMD", "Intel"))
        if vendor and (vendor == "nvidia") == amd_or_intel:
            continue
        if re.search(c.pattern, text):
            return c
    return None


def _blackwell_by_ratio(device) -> Chip | None:
    """The Blackwell rule of a spec naming neither chip nor product (module docstring)."""
    if not re.search(r"blackwell", _text(device)):
        return None
    fp16, fp32 = device.peak_fp16_tflops, device.peak_fp32_tflops
    if fp16 and fp32 and fp16 >= BLACKWELL_DATACENTRE_TENSOR_RATIO * fp32:
        c = next(c for c in CHIPS if c.compute_capability == "10.0")
        why = f"FP16 tensor peak ≥ {BLACKWELL_DATACENTRE_TENSOR_RATIO:g}× FP32"
    else:
        c = next(c for c in CHIPS if c.compute_capability == "12.0")
        why = f"FP16 tensor peak < {BLACKWELL_DATACENTRE_TENSOR_RATIO:g}× FP32"
    return dataclasses.replace(c, chip=f"{c.chip}: a Blackwell spec naming no chip, {why}")


def _chip(device) -> Chip | None:
    """:func:`chip`, else the rule of a Blackwell spec naming no chip (module docstring)."""
    c = chip(device)
    if c is not None or not getattr(device, "is_gpu", False):
        return c
    return _blackwell_by_ratio(device) if _is_nvidia(device) or not _vendor(device) else None


def compute_capability(device) -> tuple[str | None, str]:
    """``(compute capability, rule)``: the given one, else derived (module docstring);
    ``(None, why)`` when no rule applies."""
    if device.compute_capability:
        return str(device.compute_capability), "given"
    c = _chip(device)
    if c is None or c.compute_capability is None:
        return None, ("no compute capability, and no NVIDIA / AMD CDNA chip, product or "
                      "architecture name in the spec")
    return c.compute_capability, f"{c.chip}, from the spec's architecture/name"


def nvidia_ampere_or_later(device) -> bool | None:
    """Whether an NVIDIA GPU is Ampere (compute capability 8.0) or newer — ``None`` when
    neither the compute capability nor the architecture / name tells."""
    if not _is_nvidia(device):
        return False
    cc = compute_capability(device)[0] or ""
    if re.fullmatch(r"\d+\.\d+", cc):
        return float(cc) >= 8.0
    arch = _architecture(device)
    return None if arch is None else arch[2]


def nvidia_before_ampere(device) -> bool:
    """Whether the GPU is NVIDIA and known to be older than Ampere (compute capability < 8.0,
    given or derived): no bf16 tensor cores, and no bfloat16 in vLLM or TensorRT-LLM."""
    return _is_nvidia(device) and nvidia_ampere_or_later(device) is False


def has_fp8_units(device) -> bool:
    """Whether the GPU has FP8 tensor / matrix cores: NVIDIA compute capability ≥ 8.9 (Ada,
    Hopper, Blackwell — or one of them by architecture / name when the capability is unknown),
    AMD CDNA 3 / 4 (gfx940-gfx942, gfx950). A given ``peak_fp8_tflops`` says so too."""
    if getattr(device, "peak_fp8_tflops", None):
        return True
    cc = str(compute_capability(device)[0] or "").strip().lower()
    if _is_nvidia(device):
        if re.fullmatch(r"\d+\.\d+", cc):
            return float(cc) >= 8.9
        arch = _architecture(device)
        return arch is not None and arch[0] in ("Ada Lovelace", "Hopper", "Blackwell")
    if cc in ("gfx940", "gfx941", "gfx942", "gfx950"):
        return True
    arch = _architecture(device)
    return arch is not None and arch[0] in ("CDNA 3", "CDNA 4")


def arch_year(device) -> tuple[int | None, str]:
    """``(year, rule)``: the given ``arch_year``, else derived (module docstring); ``(None,
    why)`` when no rule applies."""
    if device.arch_year:
        return int(device.arch_year), "given"
    cc, how = compute_capability(device)
    cc = str(cc or "").strip().lower()
    if cc in YEAR_BY_COMPUTE_CAPABILITY:
        src = "" if how == "given" else " (derived: " + how + ")"
        return YEAR_BY_COMPUTE_CAPABILITY[cc], f"compute capability {cc}{src}"
    arch = _architecture(device)
    if arch is not None:
        return arch[1], f"{arch[0]} architecture, from the spec's architecture/name"
    return None, "no compute capability, architecture or known product name in the spec"


def derivations(device) -> tuple[Derivation, ...]:
    """The fields of a GPU spec derived by the module's rules (empty for a complete spec or a
    CPU), in the order the rules build on each other."""
    if not getattr(device, "is_gpu", False):
        return ()
    out: list[Derivation] = []
    c = _chip(device)
    cc, how = compute_capability(device)
    if not device.compute_capability and cc is not None:
        out.append(Derivation("compute_capability", cc, how))
    if not device.arch_year:
        year, rule = arch_year(device)
        if year is not None:
            out.append(Derivation("arch_year", year, rule))
    cores = device.fp32_cores_per_sm
    if cores is None and c is not None and c.fp32_cores_per_sm is not None:
        cores = c.fp32_cores_per_sm
        out.append(Derivation("fp32_cores_per_sm", cores,
                              f"{c.chip}: {cores} FP32 lanes per SM / CU"))
    fp32 = device.peak_fp32_tflops
    if not device.boost_clock_mhz and fp32 and device.sm_count and cores:
        mhz = round(fp32 * 1e6 / (2.0 * device.sm_count * cores))
        out.append(Derivation("boost_clock_mhz", mhz,
                              f"FP32 peak {fp32:g} TFLOPS = 2 × {device.sm_count} SMs × "
                              f"{cores} cores/SM × clock"))
    ampere = nvidia_ampere_or_later(device)
    fp16 = device.peak_fp16_tflops
    cdna = str(cc or "").lower()
    arch = _architecture(device)
    arch_name = arch[0] if arch is not None else ""
    if fp16 and not device.peak_tf32_tflops:
        if ampere:
            out.append(Derivation("peak_tf32_tflops", fp16 / 2.0,
                                  "NVIDIA Ampere or newer: TF32 tensor cores at half the FP16 "
                                  "peak"))
        elif cdna in ("gfx940", "gfx941", "gfx942") or arch_name == "Xe-HPC":
            out.append(Derivation("peak_tf32_tflops", fp16 / 2.0,
                                  "AMD CDNA 3 / Intel Xe-HPC: TF32 (XF32) matrix cores at half "
                                  "the FP16 peak"))
    if fp16 and not device.peak_bf16_tflops:
        amd_bf16 = (cdna.startswith("gfx9") and cdna not in ("gfx906", "gfx908")) or \
            arch_name in ("CDNA 2", "CDNA 3", "CDNA 4", "Xe-HPC")
        if ampere or amd_bf16:
            out.append(Derivation("peak_bf16_tflops", fp16,
                                  "bf16 shares the FP16 tensor / matrix units on this "
                                  "architecture"))
        elif cdna == "gfx908" or arch_name == "CDNA":
            out.append(Derivation("peak_bf16_tflops", fp16 / 2.0,
                                  "AMD CDNA 1: bf16 matrix cores at half the FP16 rate"))
    if fp16 and not device.peak_fp8_tflops and has_fp8_units(device):
        out.append(Derivation("peak_fp8_tflops", round(2.0 * fp16, 3),
                              "FP8 tensor / matrix cores at twice the FP16 peak on this "
                              "architecture (NVIDIA Ada, Hopper, Blackwell; AMD CDNA 3 / 4)"))
    if not device.peak_fp64_tflops and fp32 and c is not None and c.fp64_per_fp32:
        r = c.fp64_per_fp32
        rate = "1" if r == 1 else f"1/{round(1 / r)}"
        out.append(Derivation("peak_fp64_tflops", round(fp32 * r, 3),
                              f"{c.chip}: vector FP64 at {rate} of the FP32 rate"))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _complete_cached(device):
    ds = derivations(device)
    if not ds:
        return device, ()
    done = dataclasses.replace(device, **{d.field: d.value for d in ds})
    return done, ds


def complete(device):
    """``(device with the derived fields filled, the derivations)`` — see the module docstring.
    Devices are compared by value, so a spec is completed once per process."""
    return _complete_cached(device)


def notes_for(device, fields) -> list[str]:
    """The notes of the derivations of ``fields`` (names of :class:`~perfcast.devices.Device`
    fields a prediction path reads) for ``device`` — what that path says it assumed."""
    wanted = set(fields)
    return [d.note(device.key) for d in complete(device)[1] if d.field in wanted]


#: Every field a rule of this module may derive.
DERIVABLE_FIELDS: tuple[str, ...] = ("compute_capability", "arch_year", "fp32_cores_per_sm",
                                     "boost_clock_mhz", "peak_tf32_tflops", "peak_bf16_tflops",
                                     "peak_fp8_tflops", "peak_fp64_tflops")

__all__ = ["ARCHITECTURE_PATTERNS", "BLACKWELL_DATACENTRE_TENSOR_RATIO", "CHIPS", "Chip",
           "DERIVABLE_FIELDS", "Derivation", "YEAR_BY_COMPUTE_CAPABILITY", "arch_year", "chip",
           "complete", "compute_capability", "derivations", "has_fp8_units", "notes_for",
           "nvidia_ampere_or_later", "nvidia_before_ampere"]
