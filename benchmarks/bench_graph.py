"""Speed of graph building + feature extraction on this machine (issue #2's speed targets).

Prints, per case, the wall time of ``build_graph`` + ``to_pyg`` (imports excluded: a tiny model
is built first to warm them up), the peak RSS of a fresh process for the Llama-2-7B training
graph, and the time of a cached graph load (what a repeated ``perfcast inspect`` does).

    python benchmarks/bench_graph.py [--json reports/bench_graph.json] [--skip-llm]

Targets: resnet50 < 2 s, swin_tiny < 4 s, Llama-2-7B train seq 2048 < 60 s and < 4 GB RSS,
cached inspect < 50 ms of graph work. Whole-timm-list throughput: benchmarks/check_timm_gmacs.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

CASES = [
    ("timm:resnet50", dict(batch_size=1), "< 2 s"),
    ("timm:swin_tiny_patch4_window7_224", dict(batch_size=1), "< 4 s"),
    ("timm:resnet50", dict(batch_size=32, mode="train"), ""),
    ("hf:bert-base-uncased", dict(batch_size=8, seq_len=128), ""),
]

_LLM_CHILD = r"""
import json, resource, time, sys
t = time.perf_counter()
from perfcast.frontends import build_graph
from perfcast.workload import Workload
from perfcast.features import to_pyg
g = build_graph(Workload.of("hf:meta-llama/Llama-2-7b-hf", batch_size=1, seq_len=2048, mode="train"))
to_pyg(g)
print(json.dumps({"seconds": time.perf_counter() - t, "nodes": g.num_nodes,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    ap.add_argument("--skip-llm", action="store_true")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from perfcast.cache import get_graph
    from perfcast.features import to_pyg
    from perfcast.frontends import build_graph
    from perfcast.workload import Workload

    build_graph(Workload.of("torchvision:resnet18"))  # warm imports
    to_pyg(build_graph(Workload.of("hf:gpt2", seq_len=8)))
    results = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
               "cases": []}
    for spec, kw, target in CASES:
        t = time.perf_counter()
        g = build_graph(Workload.of(spec, **kw))
        t_graph = time.perf_counter() - t
        to_pyg(g)
        total = time.perf_counter() - t
        row = {"model": spec, **kw, "nodes": g.num_nodes, "graph_s": round(t_graph, 3),
               "graph_plus_features_s": round(total, 3), "target": target}
        results["cases"].append(row)
        print(f"{spec:40s} {json.dumps(kw):40s} nodes {g.num_nodes:6d}  graph {t_graph:6.2f} s  "
              f"+features {total:6.2f} s  {target}", flush=True)

    with tempfile.TemporaryDirectory() as d:
        os.environ["PERFCAST_CACHE_DIR"] = d
        req = Workload.of("timm:resnet50", batch_size=1)
        get_graph(req)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            get_graph(req)
            times.append(time.perf_counter() - t)
        cached_ms = 1000 * min(times)
        results["cached_load_ms"] = round(cached_ms, 2)
        print(f"cached graph load (timm:resnet50): {cached_ms:.1f} ms (target < 50 ms)")

    if not a.skip_llm:
        out = subprocess.run([sys.executable, "-c", _LLM_CHILD], capture_output=True, text=True,
                             check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        llm = json.loads(out.stdout.strip().splitlines()[-1])
        results["llama2_7b_train_seq2048"] = llm
        print(f"Llama-2-7B train seq 2048 (fresh process, incl. imports): {llm['seconds']:.1f} s, "
              f"peak RSS {llm['peak_rss_mb']:.0f} MB, {llm['nodes']} nodes (targets < 60 s, < 4096 MB)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
