"""Symbolic-batch graphs vs one trace per batch, on random timm models (issue #6 corpus).

For each model: `build_graphs(Workload.of(name, input_size=224), [16, 64])` and `build_graph` at batch 16 and
64; every node (op, shapes, FLOPs, MACs, params, bytes, attributes, phase), edge and the metadata
must be equal. Prints one line per model and a total; exit 1 on any difference.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/check_symbolic_batch.py [--seeds 1,2] [--n 12]
"""

from __future__ import annotations

import argparse
import random
import sys
import time


def signature(g):
    nodes = [(n.op, n.input_shapes, n.output_shapes, n.flops, n.macs, n.params, n.output_bytes,
              n.attrs, n.phase) for n in g.nodes]
    edges = [(e.src, e.dst, e.bytes, e.kind) for e in g.edges]
    return nodes, edges, g.meta.batch_size, g.meta.input_shapes, g.meta.total_params


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--n", type=int, default=12, help="models per seed")
    args = ap.parse_args()
    import timm

    from perfcast.frontends import build_graph, build_graphs
    from perfcast.workload import Workload

    pool = [n for n in timm.list_models() if not n.startswith("test_")]
    names = []
    for s in args.seeds.split(","):
        names += random.Random(int(s)).sample(pool, args.n)
    same = differ = skipped = 0
    for name in names:
        t = time.perf_counter()
        try:
            graphs = build_graphs(Workload.of(f"timm:{name}", input_size=(3, 224, 224)), [16, 64])
        except Exception as exc:  # noqa: BLE001 - reported, the corpus falls back for these
            print(f"{name}: no symbolic-batch trace ({str(exc)[:100]})")
            skipped += 1
            continue
        dt = time.perf_counter() - t
        ok = all(signature(graphs[b]) == signature(build_graph(Workload.of(
            spec=f"timm:{name}", batch_size=b, input_size=(3, 224, 224)))) for b in (16, 64))
        same += ok
        differ += not ok
        print(f"{name}: {'equal' if ok else 'DIFFERENT'} (symbolic trace {dt:.2f} s)")
    print(f"{same} equal, {differ} different, {skipped} without a symbolic-batch trace")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
