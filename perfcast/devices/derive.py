"""Spec fields derived from other fields, each by a stated rule — never silently defaulted.

A GPU given by its spec sheet often leaves fields out: the architecture's launch year, the TF32
or bf16 tensor peak. A model that needs one gets it here, from the fields the spec does give,
together with the sentence saying how (:func:`complete`), which the prediction repeats in its
``notes``. Where no rule applies the field stays unknown and the caller says so or refuses.

Rules (first that applies):

* ``arch_year``: the architecture's first launch year from the ``compute_capability``
  (:data:`YEAR_BY_COMPUTE_CAPABILITY`, NVIDIA "8.9", AMD "gfx90a"), else from the
  ``architecture`` text or the ``name`` (:data:`ARCHITECTURE_PATTERNS`: "Hopper", "H100",
  "RTX 4090", "MI250" …).
* ``peak_tf32_tflops``: NVIDIA Ampere and newer (compute capability ≥ 8.0, or an Ampere-or-later
  architecture by name) run TF32 on the tensor cores at half the dense FP16 rate (A100 156 of
  312, H100 SXM 494.7 of 989.4, RTX 4090 82.6 of 165.2 TFLOPS — every datasheet in
  ``devices.json``).
* ``peak_bf16_tflops``: the FP16 tensor peak on NVIDIA Ampere and newer, AMD CDNA 2 and newer,
  Intel Xe-HPC (bf16 and fp16 share the units there).

Nothing is derived for a CPU.
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
class Derivation:
    """One derived field: its name, value and the rule that gave it."""

    field: str
    value: float | int
    rule: str

    def note(self, key: str) -> str:
        return f"device {key}: {self.field} = {self.value:g} derived ({self.rule})"


def _architecture(device) -> tuple[str, int, bool] | None:
    """``(architecture, year, nvidia_ampere_or_later)`` from the architecture text and name."""
    text = f"{device.architecture or ''} | {device.name or ''}".lower()
    for pattern, arch, year, ampere in ARCHITECTURE_PATTERNS:
        if re.search(pattern, text):
            return arch, year, ampere
    return None


def _is_nvidia(device) -> bool:
    vendor = str(device.vendor or "").strip().lower()
    cc = str(device.compute_capability or "")
    return vendor == "nvidia" or (not vendor and bool(re.fullmatch(r"\d+\.\d+", cc)))


def nvidia_ampere_or_later(device) -> bool | None:
    """Whether an NVIDIA GPU is Ampere (compute capability 8.0) or newer — ``None`` when
    neither the compute capability nor the architecture / name tells."""
    if not _is_nvidia(device):
        return False
    cc = str(device.compute_capability or "")
    if re.fullmatch(r"\d+\.\d+", cc):
        return float(cc) >= 8.0
    arch = _architecture(device)
    return None if arch is None else arch[2]


def arch_year(device) -> tuple[int | None, str]:
    """``(year, rule)``: the given ``arch_year``, else derived (module docstring); ``(None,
    why)`` when no rule applies."""
    if device.arch_year:
        return int(device.arch_year), "given"
    cc = str(device.compute_capability or "").strip().lower()
    if cc in YEAR_BY_COMPUTE_CAPABILITY:
        return YEAR_BY_COMPUTE_CAPABILITY[cc], f"compute capability {cc}"
    arch = _architecture(device)
    if arch is not None:
        return arch[1], f"{arch[0]} architecture, from the spec's architecture/name"
    return None, "no compute capability, architecture or known product name in the spec"


def derivations(device) -> tuple[Derivation, ...]:
    """The fields of a GPU spec derived by the module's rules (empty for a complete spec or a
    CPU)."""
    if not getattr(device, "is_gpu", False):
        return ()
    out: list[Derivation] = []
    if not device.arch_year:
        year, rule = arch_year(device)
        if year is not None:
            out.append(Derivation("arch_year", year, rule))
    ampere = nvidia_ampere_or_later(device)
    fp16 = device.peak_fp16_tflops
    if fp16 and ampere and not device.peak_tf32_tflops:
        out.append(Derivation("peak_tf32_tflops", fp16 / 2.0,
                              "NVIDIA Ampere or newer: TF32 tensor cores at half the FP16 peak"))
    if fp16 and not device.peak_bf16_tflops:
        arch = _architecture(device)
        cc = str(device.compute_capability or "").lower()
        amd_bf16 = cc.startswith("gfx9") and cc not in ("gfx906", "gfx908") or (
            arch is not None and arch[0] in ("CDNA 2", "CDNA 3", "CDNA 4", "Xe-HPC"))
        if ampere or amd_bf16:
            out.append(Derivation("peak_bf16_tflops", fp16,
                                  "bf16 shares the FP16 tensor / matrix units on this "
                                  "architecture"))
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


__all__ = ["ARCHITECTURE_PATTERNS", "Derivation", "YEAR_BY_COMPUTE_CAPABILITY", "arch_year",
           "complete", "derivations", "nvidia_ampere_or_later"]
