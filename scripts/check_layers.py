"""The dependency picture of perfcast's rooms, and the check that no room imports a higher one.

    .venv/bin/python scripts/check_layers.py            # check; print violations (exit 1 if any)
    .venv/bin/python scripts/check_layers.py --mermaid  # also print the picture (docs/architecture.md)

Every import of a ``perfcast`` module — at module level or inside a function — is read from the
source (``ast``). A room may import rooms below it (lower rank) and itself, never above: that
is what lets a later issue add a predictor, a frontend or a decision without cycles. The
ranks are the one flow **workload → zoo → frontends → cache → features / memory → predictors →
routing → api → decisions → cli**, with the data rooms (store, datasets, profiler) and the
learning rooms (labeled, evaluation, training) beside it.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

#: Rooms from the bottom up; a room may import only rooms listed before it (and itself).
LAYERS: tuple[tuple[str, str], ...] = (
    ("errors", "user-facing errors and exit codes"),
    ("_signals", "SIGTERM as Ctrl-C in the CLI's own process, installed before anything heavy"),
    ("_version", "version string"),
    ("_memo", "bounded in-process memo shared by a server's threads"),
    ("jsonout", "answers as strict JSON (--json, perfcast serve)"),
    ("paths", "where perfcast reads and writes (env overrides)"),
    ("distributed", "the optional Ray backend: join or start a cluster, results as tasks end"),
    ("choices", "the allowed values of the commands' own options (objectives, risks, recipes …)"),
    ("ops", "the canonical operator vocabulary"),
    ("graph", "ModelGraph: nodes, edges, npz+JSON file"),
    ("workload", "Workload / ModelSpec: a request, parsed and validated once"),
    ("flops", "FLOP / MAC rules"),
    ("trees", "gradient-boosted trees (XGBoost's JSON) answered with numpy"),
    ("devices", "device registry"),
    ("energy", "power and energy in one code path: bounds, power limits, the power model"),
    ("zoo", "one builder: workload → nn.Module + example inputs"),
    ("frontends", "workload → ModelGraph (torch.export, ONNX)"),
    ("cache", "graph cache"),
    ("features", "node/edge matrices, static features, FeatureSet, PyG Data"),
    ("memory", "tensor-memory simulation and its cache"),
    ("llm", "LLM architecture, KV-cache arithmetic, generation bounds"),
    ("pretrain", "graph-encoder pre-training (TraPPM)"),
    ("store", "measurement store, graph corpus builder"),
    ("predictors", "estimators (DIPPM, NNLQP, MLP, XGBoost, roofline, TraPPM, memsim)"),
    ("datasets", "public and local measurement loaders"),
    ("profiler", "measuring on the local device"),
    ("labeled", "labeled records → graph store → feature sets"),
    ("evaluation", "tasks, splits, metrics, reports"),
    ("training", "recipes, fine-tuning, the shipped models"),
    ("uncertainty", "calibrated intervals (conformal) and the out-of-distribution score"),
    ("anchors", "what the GPUs with labels say about another GPU: anchor transfer, dominance"),
    ("routing", "which predictor answers each target, bounds"),
    ("generation", "LLM generation requests: time, memory, energy"),
    ("parallel", "training over many GPUs: layouts, collectives, per-layer arithmetic, memory "
                 "per GPU"),
    ("request", "one request schema for every command and surface; the Estimate every "
                "mode answers; the engine of each mode"),
    ("api", "perfcast.predict / load_graph"),
    ("query", "measured (a measurement store) before predicted: perfcast query"),
    ("decisions", "MIG, fit, cost, rank"),
    ("report", "perfcast report: roofline, operators, phases, memory timeline, decisions as HTML"),
    ("ui", "perfcast ui: the Gradio web page over api, decisions and report"),
    ("serve", "perfcast serve: the HTTP JSON API over api and decisions"),
    ("cli", "the perfcast command"),
    ("__init__", "the package's public names"),
    ("__main__", "python -m perfcast"),
)
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}


def room_of(module: str) -> str | None:
    """``perfcast.features.records`` → ``features``; ``perfcast`` → ``__init__``."""
    parts = module.split(".")
    if parts[0] != "perfcast":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """``(line, imported perfcast module)`` for every import in ``path``."""
    out = []
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("perfcast")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("perfcast"):
                continue
            if target == "perfcast":  # from perfcast import x → the room x when it is one
                out += [(node.lineno, f"perfcast.{a.name}") if a.name in RANK
                        else (node.lineno, "perfcast") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def analyse(root: Path) -> tuple[list[str], dict[tuple[str, str], int], list[str]]:
    """``(violations, edges {(room, imported room): count}, rooms without a rank)``."""
    violations, unknown = [], set()
    edges: dict[tuple[str, str], int] = defaultdict(int)
    for path in sorted((root / "perfcast").rglob("*.py")):
        module = module_name(path, root)
        src = room_of(module)
        if src not in RANK:
            unknown.add(src)
            continue
        for line, target in imports(path, module):
            dst = room_of(target)
            if dst is None or dst == src:
                continue
            if dst not in RANK:
                unknown.add(dst)
                continue
            edges[(src, dst)] += 1
            if RANK[dst] > RANK[src]:
                violations.append(f"{path.relative_to(root)}:{line}: {src} imports {target} "
                                  f"(a higher room: {dst})")
    return violations, dict(edges), sorted(str(u) for u in unknown)


#: Rooms nearly everything imports; the picture draws them as one base row, without arrows.
BASE = ("errors", "_version", "paths", "ops", "graph", "workload")


def reduced(edges: dict[tuple[str, str], int]) -> list[tuple[str, str]]:
    """The transitive reduction of the room graph without the base rooms: an arrow A → C is
    dropped when A reaches C through another room."""
    rooms = {r for e in edges for r in e if r not in BASE and not r.startswith("_")}
    succ = {r: {d for (s, d) in edges if s == r and d in rooms} for r in rooms}

    def reach(a: str, skip: tuple[str, str]) -> set[str]:
        seen, todo = set(), [d for d in succ[a] if (a, d) != skip]
        while todo:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo += succ[x]
        return seen

    keep = [(a, c) for a in rooms for c in succ[a] if c not in reach(a, (a, c))]
    return sorted(keep, key=lambda e: (RANK[e[0]], RANK[e[1]]))


def mermaid(edges: dict[tuple[str, str], int]) -> str:
    """The picture (Mermaid): rooms bottom-up, an arrow for each direct dependency that is not
    implied by others (transitive reduction); the base rooms every room uses are listed, not
    drawn."""
    lines = ["```mermaid", "flowchart BT"]
    used = {r for e in edges for r in e}
    for name, what in LAYERS:
        if name in used and name not in BASE and not name.startswith("_"):
            lines.append(f'    {name}["{name}<br/><small>{what}</small>"]')
    lines += [f"    {a} --> {c}" for a, c in reduced(edges)]
    lines.append("```")
    base = ", ".join(n for n in BASE if not n.startswith("_"))
    lines.append(f"Every room may also use the base rooms: {base}.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--mermaid", action="store_true", help="print the dependency picture")
    args = ap.parse_args()
    violations, edges, unknown = analyse(Path(args.root))
    if args.mermaid:
        print(mermaid(edges))
    for v in violations:
        print(v)
    for u in unknown:
        print(f"room without a rank in LAYERS: {u}")
    print(f"{len(edges)} room-to-room dependencies, {len(violations)} upward imports, "
          f"{len(unknown)} unranked rooms", file=sys.stderr)
    return 1 if violations or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
