"""The reference probe of the shipped CPU time model: the probe of the machine its training data
was measured on, derived from that machine's own records (it cannot be probed again).

``perfcast.predictors.kernelsum.local_dataset_reference`` reads the CPU dataset's
``machine.json`` (GEMM at N = 1024 and streaming add per thread count, measured with the
dataset) and ``ops-t1.csv`` (its operator benchmark: tiny ``relu`` / ``add`` nodes give the
per-op dispatch), and what ``measurements.db`` recorded of the machine. Prints it, the probe of
this machine (``--probe``: run now, not cached) and the ratios; ``--write`` stores the reference
in the shipped model's ``config.json`` (``state.reference_probe``, what ``perfcast train`` writes
when it fits kernelsum on the project dataset).

    python benchmarks/cpu_reference_probe.py [--model perfcast/shipped/cpu-fp32-time-kernelsum]
        [--write] [--probe] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.setdefault("PERFCAST_DATASETS", str(HERE.parent / "datasets"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path,
                    default=HERE.parent / "perfcast" / "shipped" / "cpu-fp32-time-kernelsum")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--probe", action="store_true", help="probe this machine too (not cached)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    from perfcast.devices import probe as P
    from perfcast.predictors.kernelsum import local_dataset_reference

    ref = local_dataset_reference()
    print(json.dumps(ref, indent=1))
    if a.probe:
        here = P.run_probe(a.threads)
        r, note = P.reference_at(ref, a.threads)
        print(f"this machine ({json.dumps(P.machine_key(a.threads))}):\n  {here.describe()} "
              f"[{here.seconds:.2f} s]\nreference:\n  {r.describe()} {note}\nratios (time here /"
              f" time there): {P.time_ratios(here, r)}")
    if a.write:
        cfg_path = a.model / "config.json"
        cfg = json.loads(cfg_path.read_text())
        if cfg.get("predictor") != "kernelsum":
            print(f"{cfg_path}: not a kernelsum model", file=sys.stderr)
            return 1
        cfg["state"]["reference_probe"] = ref
        from perfcast.paths import write_file_atomically

        write_file_atomically(cfg_path, json.dumps(cfg, indent=1))
        print(f"wrote state.reference_probe into {cfg_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
