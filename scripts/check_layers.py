"""The dependency picture of perfcast's rooms, and the checks of its two rules.

    .venv/bin/python scripts/check_layers.py            # check; print violations (exit 1 if any)
    .venv/bin/python scripts/check_layers.py --mermaid  # also print the picture (docs/architecture.md)

Every import of a ``perfcast`` module — at module level or inside a function — is read from the
source (``ast``), and so is every string naming one (what ``importlib`` would import).

1. **Ranks.** A room may import rooms below it (lower rank) and itself, never above: that is
   what lets a later issue add a predictor, a frontend or a decision without cycles. The ranks
   are the one flow **workload → zoo → frontends → cache → features / memory → predictors →
   shipped → routing → request → api → decisions → faces (cli, serve, ui, report: one room)**.
2. **Two stacks.** The *runtime* — everything a prediction touches, from the request to the
   estimate, the decisions and the faces — never imports the *research* stack
   (:data:`RESEARCH`: the measurement store's writers, the datasets, the profiler, the labeled
   records, pre-training, evaluation and training), which sits on top of the runtime and may use
   all of it. The shipped models are runtime (``shipped``: package data and one loader); the
   research stack writes them. The one bridge is the research *faces*
   (:data:`RESEARCH_FACES`: the commands ``perfcast train``, ``evaluate``, ``collect`` …): only
   the CLI's command registration imports them, and they import research rooms only inside
   their command functions — so ``import perfcast.faces.cli`` and every prediction load nothing of the
   research stack.
"""

from __future__ import annotations

import argparse
import ast
import re
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
    ("measured", "a measurement store read-only: the rows of one workload (query, --store)"),
    ("predictors", "estimators (DIPPM, NNLQP, MLP, XGBoost, roofline, TraPPM, memsim) and "
                   "the pre-trained graph encoder they answer with"),
    ("shipped", "the shipped models: their registry and one loader, load_shipped(id)"),
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
    ("pretrain", "graph-encoder pre-training (TraPPM): corpus, pretext tasks, checkpoints"),
    ("store", "measurement store (schema, writers, queue, locks), graph corpus builder"),
    ("datasets", "public and local measurement loaders"),
    ("profiler", "measuring on the local device"),
    ("labeled", "labeled records → graph store → feature sets"),
    ("evaluation", "tasks, splits, metrics, reports"),
    ("training", "recipes, fine-tuning, calibration: what builds the shipped models"),
    ("faces", "what users talk to: the perfcast command (cli), the HTTP JSON API (serve), the "
              "web page (ui), the HTML report (report)"),
    ("__init__", "the package's public names"),
    ("__main__", "python -m perfcast"),
)
RANK = {name: i for i, (name, _) in enumerate(LAYERS)}
#: The research stack: rooms no runtime module imports (rule 2 of the module docstring).
RESEARCH: tuple[str, ...] = ("pretrain", "store", "datasets", "profiler", "labeled",
                             "evaluation", "training")
#: Research faces: modules of a runtime room that are research commands. Only
#: :data:`FACE_REGISTRY` imports them; they import research rooms inside functions only.
RESEARCH_FACES: dict[str, str] = {
    "perfcast.faces.cli.data": "perfcast collect, corpus, calibrate, query --measure-missing (and "
                         "inspect, query: runtime commands registered beside them)",
    "perfcast.faces.cli.research": "perfcast train, evaluate, pretrain",
}
#: The module that registers the CLI's commands (the research faces among them).
FACE_REGISTRY = "perfcast.faces.cli"


def stack_of(module: str) -> str:
    """``research`` for a module of a research room or a research face, else ``runtime``."""
    return "research" if room_of(module) in RESEARCH or module in RESEARCH_FACES else "runtime"


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
    return [(line, target) for line, target, _ in scoped_imports(path, module, faces=False)]


def _lazy_nodes(tree: ast.AST) -> set[int]:
    """``id`` of every node run only when called: inside a function or a lambda, or under
    ``if TYPE_CHECKING:``."""
    lazy: set[int] = set()

    def visit(node: ast.AST, inside: bool) -> None:
        if inside:
            lazy.add(id(node))
        for child in ast.iter_child_nodes(node):
            deeper = inside or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda))
            if isinstance(node, ast.If) and child in node.body and \
                    "TYPE_CHECKING" in ast.unparse(node.test):
                deeper = True
            visit(child, deeper)

    visit(tree, False)
    return lazy


def scoped_imports(path: Path, module: str, faces: bool = True) -> list[tuple[int, str, bool]]:
    """``(line, imported perfcast module, eager)`` for every import in ``path``; ``eager``:
    run when the module is imported (not inside a function). ``faces``: ``from a.package import
    face`` also yields the research face itself."""
    out = []
    tree = ast.parse(path.read_text(), str(path))
    lazy = _lazy_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        eager = id(node) not in lazy
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, eager) for a in node.names
                    if a.name.startswith("perfcast")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("perfcast"):
                continue
            if target == "perfcast":  # from perfcast import x → the room x when it is one
                out += [(node.lineno, f"perfcast.{a.name}" if a.name in RANK else "perfcast",
                         eager) for a in node.names]
            else:
                out.append((node.lineno, target, eager))
                # from a package import a research face: the face itself
                out += [(node.lineno, f"{target}.{a.name}", eager) for a in node.names
                        if faces and f"{target}.{a.name}" in RESEARCH_FACES]
    return out


_MODULE_NAME = re.compile(r"perfcast(\.\w+)+")


def named_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every string constant that is exactly a ``perfcast.*`` module
    name (what a registry or a lazy attribute hands to ``importlib``)."""
    tree = ast.parse(path.read_text(), str(path))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and _MODULE_NAME.fullmatch(n.value)]


def analyse(root: Path) -> tuple[list[str], dict[tuple[str, str], int], list[str]]:
    """``(violations of both rules, edges {(room, imported room): count}, rooms without a
    rank)``."""
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
        violations += stack_violations(path, module, root)
    return violations, dict(edges), sorted(str(u) for u in unknown)


def stack_violations(path: Path, module: str, root: Path) -> list[str]:
    """Rule 2 (module docstring) for one module: a runtime module imports (or names) no
    research room and no research face but from :data:`FACE_REGISTRY`; a research face
    imports research rooms inside functions only."""
    out = []
    where = path.relative_to(root)
    if module in RESEARCH_FACES:
        for line, target, eager in scoped_imports(path, module):
            if eager and room_of(target) in RESEARCH:
                out.append(f"{where}:{line}: the research face {module} imports {target} at "
                           f"module level (import it inside the command function)")
        return out
    if stack_of(module) == "research":
        return out
    for line, target, _ in scoped_imports(path, module):
        if room_of(target) in RESEARCH:
            out.append(f"{where}:{line}: runtime module {module} imports {target} (the research "
                       f"stack: {room_of(target)})")
        elif target in RESEARCH_FACES and module != FACE_REGISTRY:
            out.append(f"{where}:{line}: runtime module {module} imports the research face "
                       f"{target} (only {FACE_REGISTRY} registers it)")
    for line, target in named_modules(path):
        if room_of(target) in RESEARCH or target in RESEARCH_FACES:
            out.append(f"{where}:{line}: runtime module {module} names {target!r} (the research "
                       f"stack, imported by name)")
    return out


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
    """The picture (Mermaid): rooms bottom-up in their two stacks, an arrow for each direct
    dependency that is not implied by others (transitive reduction); the base rooms every room
    uses are listed, not drawn."""
    lines = ["```mermaid", "flowchart BT"]
    used = {r for e in edges for r in e}
    for stack, title in (("runtime", "runtime: request → estimate → decision → faces"),
                         ("research", "research: never imported by the runtime")):
        lines.append(f'    subgraph {stack}["{title}"]')
        for name, what in LAYERS:
            if name in used and name not in BASE and not name.startswith("_") and \
                    (name in RESEARCH) == (stack == "research"):
                lines.append(f'        {name}["{name}<br/><small>{what}</small>"]')
        lines.append("    end")
    lines += [f"    {a} --> {c}" for a, c in reduced(edges)]
    lines.append("```")
    base = ", ".join(n for n in BASE if not n.startswith("_"))
    faces = "; ".join(f"`{m}` ({what})" for m, what in RESEARCH_FACES.items())
    lines.append(f"Every room may also use the base rooms: {base}. The research faces — "
                 f"commands of the `cli` room that run research code, imported only by "
                 f"`{FACE_REGISTRY}` and importing research rooms only inside their command "
                 f"functions: {faces}.")
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
    upward = sum("(a higher room:" in v for v in violations)
    print(f"{len(edges)} room-to-room dependencies, {upward} upward imports, "
          f"{len(violations) - upward} runtime-to-research imports, "
          f"{len(unknown)} unranked rooms", file=sys.stderr)
    return 1 if violations or unknown else 0


if __name__ == "__main__":
    sys.exit(main())
