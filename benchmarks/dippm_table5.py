"""DIPPM Table 5 (MIG profile prediction, A100-40GB inference) beside perfcast's MIG advice.

Run from the repository root::

    .venv/bin/python benchmarks/dippm_table5.py

For the six (model, batch) cases of DIPPM's Table 5 (``../shared/papers/dippm.txt`` §4.4) it
computes

1. DIPPM's columns — predicted memory, predicted MIG profile, measured memory — and the profile
   the measured memory implies under DIPPM's eq. 2 (the smallest of 1g.5gb / 2g.10gb / 3g.20gb /
   7g.40gb whose nominal 5 / 10 / 20 / 40 GB exceeds it);
2. perfcast's rule applied to the measured memory: ``recommend_mig(None, memory_mb=<measured>,
   margin=0.0)`` and with the default margin 0.1 (perfcast compares against the *usable* memory
   of each profile as ``nvidia-smi mig -lgip`` lists it, not the nominal size);
3. perfcast end to end: ``recommend_mig("timm:<name>", batch_size=b, mode="infer",
   precision="fp32")`` — predicted memory (MiB), its relative error vs DIPPM's measurement, and
   the profile;
4. a diagnostic: perfcast's tensor-memory simulation of the same forward pass *with autograd
   enabled* (the ``forward`` phase peak of ``simulate_memory(..., mode="train", optimizer="sgd")``
   — plain SGD has no optimizer state, so this is parameters + buffers + input + everything
   autograd saves for backward) plus the measured runtime overhead
   (``perfcast.memory.overhead.runtime_overhead_mb()``): what an inference run *without*
   ``torch.no_grad()`` keeps alive. Its error vs the measurement and the profile it implies
   (``recommend_mig(None, memory_mb=..., margin=0.1)``).

Writes ``reports/decisions/dippm_table5.md`` and ``reports/decisions/dippm_table5.json`` and
prints the table. Units: DIPPM's "MB" is taken as MiB (what ``nvidia-smi`` reports); perfcast's
numbers are MiB. CPU only; no GPU is used (nothing is measured here — the measurements are
DIPPM's).
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import perfcast  # noqa: E402
from perfcast.memory.overhead import runtime_overhead, runtime_overhead_mb  # noqa: E402
from perfcast.memory.simulate import simulate_memory  # noqa: E402

DEVICE = "a100-40gb"
OUT_MD = ROOT / "reports" / "decisions" / "dippm_table5.md"
OUT_JSON = ROOT / "reports" / "decisions" / "dippm_table5.json"

# DIPPM Table 5: (paper name, timm spec, batch, predicted MIG, predicted MB, measured MB)
# (the "Actual" 1g.5gb / 2g.10gb / 3g.20gb / 7g.40gb percentage columns are in PAPER_PCT)
CASES = [
    ("densenet121", "timm:densenet121", 8, "1g.5gb", 2865, 3272),
    ("densenet121", "timm:densenet121", 32, "2g.10gb", 5952, 6294),
    ("swin_base_patch4", "timm:swin_base_patch4_window7_224", 2, "1g.5gb", 2873, 2944),
    ("swin_base_patch4", "timm:swin_base_patch4_window7_224", 16, "2g.10gb", 6736, 6156),
    ("convnext_base", "timm:convnext_base", 4, "1g.5gb", 4771, 1652),
    ("convnext_base", "timm:convnext_base", 128, "7g.40gb", 26439, 30996),
]
# Table 5's printed "Actual" columns: memory as a percentage of each profile (None = blank cell)
PAPER_PCT = {
    ("densenet121", 8): (58, 30, 15, 8),
    ("densenet121", 32): (None, 60, 30, 16),
    ("swin_base_patch4", 2): (52, 27, 14, 7),
    ("swin_base_patch4", 16): (None, 59, 30, 15),
    ("convnext_base", 4): (61, 31, 16, 8),
    ("convnext_base", 128): (None, None, None, 77),
}
# DIPPM eq. 2: nominal profile sizes (GB)
EQ2 = [("1g.5gb", 5), ("2g.10gb", 10), ("3g.20gb", 20), ("7g.40gb", 40)]


def eq2_profile(mem_mb: float, gb: float = 1024.0) -> str | None:
    """DIPPM eq. 2: the smallest standard profile whose nominal size exceeds ``mem_mb``
    (``gb`` MB per GB)."""
    for name, size in EQ2:
        if mem_mb < size * gb:
            return name
    return None


def rel(x: float | None, ref: float) -> float | None:
    return None if x is None else (x - ref) / ref


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x * 100:+.0f} %"


def mb(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def run_case(paper_name, spec, b, dippm_mig, dippm_pred, measured, overhead):
    t0 = time.perf_counter()
    eq2 = eq2_profile(measured)
    if eq2 != eq2_profile(measured, gb=1000.0):  # MB-vs-MiB ambiguity must not matter
        raise SystemExit(f"{paper_name} b{b}: eq. 2 profile depends on the GB unit")
    given0 = perfcast.recommend_mig(None, device=DEVICE, memory_mb=measured, margin=0.0)
    given1 = perfcast.recommend_mig(None, device=DEVICE, memory_mb=measured, margin=0.1)

    t1 = time.perf_counter()
    e2e = perfcast.recommend_mig(spec, device=DEVICE, batch_size=b, mode="infer",
                                 precision="fp32")
    t_e2e = time.perf_counter() - t1

    t1 = time.perf_counter()
    sim = simulate_memory(spec, batch_size=b, mode="train", precision="fp32", optimizer="sgd")
    t_sim = time.perf_counter() - t1
    fwd_tensors = sim.phase_peaks_mb["forward"]
    fwd_total = fwd_tensors + overhead
    fwd_adv = perfcast.recommend_mig(None, device=DEVICE, memory_mb=fwd_total, margin=0.1)

    return {
        "model": paper_name, "timm": spec, "batch_size": b,
        "dippm": {"predicted_mig": dippm_mig, "predicted_mb": dippm_pred,
                  "measured_mb": measured, "predicted_error": rel(dippm_pred, measured),
                  "measured_eq2_profile": eq2,
                  "predicted_mig_matches_measured_eq2": dippm_mig == eq2},
        "perfcast_given_measured": {
            "margin_0": {"profile": given0.profile, "usable_mb": given0.usable_mb,
                         "headroom_mb": given0.headroom_mb},
            "margin_0.1": {"profile": given1.profile, "usable_mb": given1.usable_mb,
                           "headroom_mb": given1.headroom_mb,
                           "required_mb": given1.required_mb},
        },
        "perfcast_end_to_end": {
            "memory_mb": e2e.memory_mb, "error_vs_measured": rel(e2e.memory_mb, measured),
            "profile": e2e.profile, "margin": e2e.margin, "required_mb": e2e.required_mb,
            "predictor": e2e.predictor, "notes": e2e.notes, "seconds": t_e2e,
            "matches_measured_eq2": e2e.profile == eq2,
        },
        "forward_with_autograd": {
            "tensor_forward_peak_mb": fwd_tensors, "runtime_overhead_mb": overhead,
            "memory_mb": fwd_total, "error_vs_measured": rel(fwd_total, measured),
            "profile_margin_0.1": fwd_adv.profile,
            "matches_measured_eq2": fwd_adv.profile == eq2,
            "param_mb": sim.param_mb, "buffer_mb": sim.buffer_mb, "input_mb": sim.input_mb,
            "phase_peaks_mb": sim.phase_peaks_mb, "seconds": t_sim,
        },
        "consistency": {
            # Table 5 prints the measured memory as a % of each profile; the 7g.40gb column is
            # the full-GPU run the "measured MB" column comes from (40 GB = 40,000 MB)
            "paper_pct_1g_2g_3g_7g": PAPER_PCT[(paper_name, b)],
            "measured_pct_of_40000mb": 100.0 * measured / 40000.0,
            "paper_7g_pct_matches_measured": round(100.0 * measured / 40000.0)
            == PAPER_PCT[(paper_name, b)][3]
            or int(100.0 * measured / 40000.0) == PAPER_PCT[(paper_name, b)][3],
            "memory_implied_by_paper_7g_pct_mb": PAPER_PCT[(paper_name, b)][3] * 400.0,
            # measured − simulated live tensors: the non-tensor memory each hypothesis needs
            "measured_minus_forward_autograd_tensors_mb": measured - fwd_tensors,
            "measured_minus_no_grad_tensors_mb": (
                measured - (e2e.memory_mb - overhead)
                if e2e.predictor.get("memory_mb") == "simulation" and e2e.memory_mb else None),
        },
        "seconds": time.perf_counter() - t0,
    }


HEADER = ("| Model | b | DIPPM pred MB | DIPPM MIG | DIPPM measured MB | eq.2 on measured "
          "| perfcast(measured), m=0 | perfcast(measured), m=0.1 "
          "| perfcast e2e MiB | e2e err | e2e MIG "
          "| fwd+autograd MiB | fwd err | fwd MIG (m=0.1) |")


def table(rows) -> str:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for r in rows:
        d, g, e, f = (r["dippm"], r["perfcast_given_measured"], r["perfcast_end_to_end"],
                      r["forward_with_autograd"])
        lines.append(
            f"| {r['model']} | {r['batch_size']} | {d['predicted_mb']:,} | {d['predicted_mig']} "
            f"| {d['measured_mb']:,} | {d['measured_eq2_profile']} "
            f"| {g['margin_0']['profile']} | {g['margin_0.1']['profile']} "
            f"| {mb(e['memory_mb'])} | {pct(e['error_vs_measured'])} | {e['profile']} "
            f"| {mb(f['memory_mb'])} | {pct(f['error_vs_measured'])} "
            f"| {f['profile_margin_0.1']} |")
    return "\n".join(lines)


CHEAD = ("| Model | b | measured MB | measured / 40 GB | Table 5's printed 7g.40gb % "
         "| no_grad tensors MiB | measured − no_grad tensors | fwd+autograd tensors MiB "
         "| measured − fwd+autograd tensors |")


def consistency_table(rows) -> str:
    lines = [CHEAD, "|" + "---|" * CHEAD.count(" | ") + "---|"]
    for r in rows:
        c, f, d = r["consistency"], r["forward_with_autograd"], r["dippm"]
        ng = c["measured_minus_no_grad_tensors_mb"]
        lines.append(
            f"| {r['model']} | {r['batch_size']} | {d['measured_mb']:,} "
            f"| {c['measured_pct_of_40000mb']:.1f} % | {c['paper_pct_1g_2g_3g_7g'][3]} % "
            f"| {mb(None if ng is None else d['measured_mb'] - ng)} | {mb(ng)} "
            f"| {mb(f['tensor_forward_peak_mb'])} "
            f"| {mb(c['measured_minus_forward_autograd_tensors_mb'])} |")
    return "\n".join(lines)


def summary(rows) -> dict:
    def case(r):
        return f"{r['model']} b{r['batch_size']}"

    def mape(key):
        errs = [abs(r[key]["error_vs_measured"]) for r in rows
                if r[key]["error_vs_measured"] is not None]
        return sum(errs) / len(errs) if errs else None

    return {
        "dippm_mape": sum(abs(r["dippm"]["predicted_error"]) for r in rows) / len(rows),
        "dippm_mig_matches_eq2_measured": [case(r) for r in rows
                                           if r["dippm"]["predicted_mig_matches_measured_eq2"]],
        "given_measured_m0_matches_eq2": [
            case(r) for r in rows
            if r["perfcast_given_measured"]["margin_0"]["profile"]
            == r["dippm"]["measured_eq2_profile"]],
        "given_measured_m01_matches_eq2": [
            case(r) for r in rows
            if r["perfcast_given_measured"]["margin_0.1"]["profile"]
            == r["dippm"]["measured_eq2_profile"]],
        "e2e_mape": mape("perfcast_end_to_end"),
        "e2e_matches_eq2": [case(r) for r in rows
                            if r["perfcast_end_to_end"]["matches_measured_eq2"]],
        "e2e_differs": [f"{case(r)} ({r['perfcast_end_to_end']['profile']} vs "
                        f"{r['dippm']['measured_eq2_profile']})" for r in rows
                        if not r["perfcast_end_to_end"]["matches_measured_eq2"]],
        "fwd_mape": mape("forward_with_autograd"),
        "fwd_matches_eq2": [case(r) for r in rows
                            if r["forward_with_autograd"]["matches_measured_eq2"]],
        "fwd_differs": [f"{case(r)} ({r['forward_with_autograd']['profile_margin_0.1']} vs "
                        f"{r['dippm']['measured_eq2_profile']})" for r in rows
                        if not r["forward_with_autograd"]["matches_measured_eq2"]],
    }


def main() -> int:
    import timm
    import torch

    t0 = time.perf_counter()
    overhead = runtime_overhead_mb()
    rows = []
    for c in CASES:
        r = run_case(*c, overhead)
        rows.append(r)
        print(f"  {r['model']} b{r['batch_size']}: e2e {mb(r['perfcast_end_to_end']['memory_mb'])}"
              f" MiB → {r['perfcast_end_to_end']['profile']}; fwd+autograd "
              f"{mb(r['forward_with_autograd']['memory_mb'])} MiB "
              f"({r['seconds']:.1f} s)", file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    s = summary(rows)
    env = {"date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
           "wall_seconds": wall, "torch": torch.__version__, "timm": timm.__version__,
           "python": platform.python_version(), "device": DEVICE,
           "runtime_overhead": runtime_overhead(),
           "command": ".venv/bin/python benchmarks/dippm_table5.py"}
    tbl = table(rows)
    ctbl = consistency_table(rows)
    print(tbl)
    print()
    print(ctbl)

    OUT_MD.parent.mkdir(parents=True, exist_ok=True)
    OUT_JSON.write_text(json.dumps({"environment": env, "summary": s, "cases": rows},
                                   indent=1, default=str) + "\n")
    OUT_MD.write_text(markdown(tbl, ctbl, rows, s, env))
    print(f"\nwrote {OUT_MD.relative_to(ROOT)} and {OUT_JSON.relative_to(ROOT)} "
          f"({wall:.1f} s)")
    return 0


def markdown(tbl, ctbl, rows, s, env) -> str:
    ov = env["runtime_overhead"]
    e2e_s = sum(r["perfcast_end_to_end"]["seconds"] for r in rows)
    sim_s = sum(r["forward_with_autograd"]["seconds"] for r in rows)
    from perfcast.decisions.mig import mig_profiles

    usable = " / ".join(f"{p.usable_mb / 1024:g}" for p in mig_profiles(env["device"])
                        if p.standard)
    return f"""# DIPPM Table 5 (MIG profiles, A100-40GB inference) vs perfcast

Generated by `{env['command']}` on {env['date']} — wall time {env['wall_seconds']:.1f} s
(2 CPU cores, no GPU), torch {env['torch']}, timm {env['timm']}, Python {env['python']}.
Raw numbers: `dippm_table5.json`. Of the wall time, the six end-to-end `recommend_mig` calls
took {e2e_s:.1f} s (perfcast's on-disk graph and simulation caches in `~/.cache/perfcast` used as
found) and the six forward-with-autograd simulations {sim_s:.1f} s (uncached).

Source: DIPPM paper, Table 5 (§4.4) and eq. 2 (§3.5). DIPPM's "MB" is read as MiB (what
`nvidia-smi` reports; the eq. 2 profile of every measured value is the same with 1000- or
1024-MB gigabytes). All perfcast numbers are MiB; fp32; device `{env['device']}`.

Columns:

* **DIPPM pred MB / DIPPM MIG / DIPPM measured MB** — Table 5 as published (measured on a
  full A100-40GB = 7g.40gb).
* **eq.2 on measured** — the profile DIPPM's own rule (eq. 2: smallest of 1g.5gb / 2g.10gb /
  3g.20gb / 7g.40gb whose nominal 5 / 10 / 20 / 40 GB exceeds the memory) gives for the
  *measured* memory: the "right answer" for each row.
* **perfcast(measured)** — `recommend_mig(None, device="a100-40gb", memory_mb=<measured>,
  margin=…)`: perfcast's rule given the measurement (it compares against the usable memory
  `nvidia-smi mig -lgip` lists — {usable} GiB — not the nominal size).
* **perfcast e2e** — `recommend_mig("timm:<name>", device="a100-40gb", batch_size=b,
  mode="infer", precision="fp32")` (default margin 0.1): predicted memory, its error vs
  DIPPM's measurement, profile. Memory predictor: {_predictor_desc(rows)}.
* **fwd+autograd** — diagnostic: the `forward` entry of `MemoryEstimate.phase_peaks_mb` from
  `simulate_memory("timm:<name>", batch_size=b, mode="train", precision="fp32",
  optimizer="sgd")` (parameters + buffers + input + what autograd saves for backward; plain
  SGD has no optimizer state and the gradients are freed before the forward) plus the measured
  runtime overhead {ov['runtime_overhead_mb']:,.1f} MiB (`runtime_overhead_mb()`, median of
  {ov['runs']} runs, {ov['device']}); profile via `recommend_mig(None, memory_mb=…,
  margin=0.1)`. This is what an inference run *without* `torch.no_grad()` keeps alive.

{tbl}

Errors are (predicted − measured) / measured. Mean absolute error vs DIPPM's measurements:
DIPPM's own prediction {s['dippm_mape'] * 100:.0f} %, perfcast end to end
{_p(s['e2e_mape'])}, forward-with-autograd simulation {_p(s['fwd_mape'])}.

### Which hypothesis fits DIPPM's measurements?

If DIPPM's "measured" numbers were inference passes under `torch.no_grad()`, measured − simulated
live tensors (the CUDA context, library workspaces and allocator caching) would be roughly constant
across rows; the same holds if they were forward passes with autograd on. The columns below give
that difference for both hypotheses, plus a check of the "measured MB" column against Table 5's
own printed percentage of the 7g.40gb profile (40 GB read as 40,000 MB).

{ctbl}

## What this shows

{paragraph(rows, s)}
"""


def _p(x):
    return "—" if x is None else f"{x * 100:.0f} %"


def _predictor_desc(rows) -> str:
    names = sorted({r["perfcast_end_to_end"]["predictor"].get("memory_mb", "?") for r in rows})
    return ", ".join(f"`{n}`" for n in names)


def paragraph(rows, s) -> str:
    """Written from the numbers: every claim below is computed, not assumed."""
    order = ["1g.5gb", "2g.10gb", "3g.20gb", "7g.40gb"]

    def case(r):
        return f"{r['model']} b{r['batch_size']}"

    def lst(xs):
        return ", ".join(xs) if xs else "none"

    def span(xs, fmt="{:,.0f}", sep="–"):
        return f"{fmt.format(min(xs))}{sep}{fmt.format(max(xs))}"

    def ratio(r):
        return r["perfcast_end_to_end"]["memory_mb"] / r["dippm"]["measured_mb"] * 100

    differ = [r for r in rows if not r["perfcast_end_to_end"]["matches_measured_eq2"]]
    smaller = [r for r in differ if r["perfcast_end_to_end"]["profile"] in order
               and order.index(r["perfcast_end_to_end"]["profile"])
               < order.index(r["dippm"]["measured_eq2_profile"])]
    big = [case(r) for r in rows if r["dippm"]["measured_mb"] > 5 * 1024]
    small = [case(r) for r in rows if r["dippm"]["measured_mb"] <= 5 * 1024]
    # rows whose printed measured MB agrees with Table 5's own 7g.40gb percentage
    ok = [r for r in rows if r["consistency"]["paper_7g_pct_matches_measured"]]
    bad = [r for r in rows if not r["consistency"]["paper_7g_pct_matches_measured"]]
    fwd_ok = [r["forward_with_autograd"]["error_vs_measured"] * 100 for r in ok]
    e2e_ratio = [ratio(r) for r in ok if r["perfcast_end_to_end"]["memory_mb"]]

    def mae(key, rs):
        return sum(abs(r[key]["error_vs_measured"]) for r in rs) / len(rs) * 100
    gap_fwd = [r["consistency"]["measured_minus_forward_autograd_tensors_mb"] for r in ok]
    gap_ng = [r["consistency"]["measured_minus_no_grad_tensors_mb"] for r in ok
              if r["consistency"]["measured_minus_no_grad_tensors_mb"] is not None]
    ov = rows[0]["forward_with_autograd"]["runtime_overhead_mb"]
    dippm_ok = sum(abs(r["dippm"]["predicted_error"]) for r in ok) / len(ok) * 100
    agree_profiles = ", ".join(sorted({r["perfcast_end_to_end"]["profile"] for r in rows
                                       if r["perfcast_end_to_end"]["matches_measured_eq2"]}))
    only = "only " if set(s["e2e_matches_eq2"]) == set(small) else ""

    out = [
        f"**The rule is not where perfcast and DIPPM differ.** Given DIPPM's *measured* memory, "
        f"perfcast's `recommend_mig` returns the eq. 2 profile in "
        f"{len(s['given_measured_m0_matches_eq2'])}/6 cases with margin 0 and "
        f"{len(s['given_measured_m01_matches_eq2'])}/6 with the default 10 % margin (no "
        f"measurement is near a profile boundary), and DIPPM's own predicted profile matches "
        f"eq. 2 on its measurement in {len(s['dippm_mig_matches_eq2_measured'])}/6 cases.",
        f"**The memory is.** perfcast's default inference prediction is a `torch.no_grad()` "
        f"pass (simulated live tensors + {ov:,.0f} MiB runtime overhead), which comes out at "
        f"{span(e2e_ratio)} % of DIPPM's measurements on the {len(ok)} self-consistent rows"
        + "".join(f" ({ratio(r):.0f} % on {case(r)})" for r in bad if
                  r["perfcast_end_to_end"]["memory_mb"])
        + f"; mean absolute error {mae('perfcast_end_to_end', ok):.0f} % on those rows, "
        f"vs {mae('forward_with_autograd', ok):.0f} % for the forward-with-autograd "
        f"simulation and {dippm_ok:.0f} % for DIPPM's own prediction. End to end perfcast "
        f"therefore agrees with the profile of the measurement {only}where DIPPM measured "
        f"under 5 GiB — {lst(s['e2e_matches_eq2'])} ({agree_profiles}) — and for the cases "
        f"measured above 5 GiB ({lst(big)}) it picks "
        + ("a smaller profile in every one: "
           if {case(r) for r in smaller} == {case(r) for r in differ} == set(big)
           else "a different profile in some: ")
        + f"{lst(s['e2e_differs'])}. Against DIPPM's measurements those are under-provisioned "
        f"slices (the measured runs would not fit in them); for a real no_grad "
        f"deployment they are, by perfcast's simulation, what the model needs.",
        f"**DIPPM's 'inference' numbers look like forward passes with autograd on — confirmed "
        f"for {len(ok)} of 6 rows.** The forward-with-autograd simulation + overhead is within "
        f"{span(fwd_ok, '{:+.0f} %', ' to ')} of the measurement on those rows "
        f"({lst([case(r) for r in ok])}) and gives the eq. 2 profile in "
        f"{len(s['fwd_matches_eq2'])}/6 cases. Measured − simulated tensors is nearly constant "
        f"under that hypothesis ({span(gap_fwd)} MiB, i.e. CUDA context + workspaces + "
        f"allocator slack about {min(gap_fwd) - ov:,.0f}–{max(gap_fwd) - ov:,.0f} MiB larger "
        f"than perfcast's {ov:,.0f} MiB overhead, which is why the simulation is consistently "
        f"a little low), but ranges from {span(gap_ng, sep=' to ')} MiB under the no_grad "
        f"hypothesis — no fixed overhead explains that. The paper only says memory was read "
        f"with NVML over 30 inference runs; it does not say whether `torch.no_grad()` was used.",
    ]
    for r in bad:
        c, f = r["consistency"], r["forward_with_autograd"]
        out.append(
            f"**{case(r)} is the exception, and it is inconsistent within Table 5 itself:** "
            f"its {r['dippm']['measured_mb']:,} MB is {c['measured_pct_of_40000mb']:.1f} % of "
            f"40 GB while the row prints {c['paper_pct_1g_2g_3g_7g'][3]} % for 7g.40gb "
            f"(≈ {c['memory_implied_by_paper_7g_pct_mb']:,.0f} MB; its 1g.5gb / 2g.10gb / "
            f"3g.20gb cells, {' / '.join(f'{x} %' for x in c['paper_pct_1g_2g_3g_7g'][:3])}, "
            f"also imply ≈ 3 GB). Measured − simulated forward-with-autograd tensors would be "
            f"only {c['measured_minus_forward_autograd_tensors_mb']:,.0f} MiB, far below the "
            f"other rows; the simulation + overhead gives {f['memory_mb']:,.0f} MiB "
            f"({pct(f['error_vs_measured'])} vs the printed number), close to what the "
            f"percentage cells imply. Either way every estimate for this row stays in 1g.5gb.")
    out.append(f"Six cases from one paper are a small sample; the measured numbers are DIPPM's "
               f"(JUWELS Booster A100-40GB), nothing here ran on a GPU.")
    return "\n\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
