"""Commands for users who train and judge predictors ("Research" in ``perfcast --help``):
``train`` (recipes, your records, fine-tuning), ``evaluate`` (predictors on model-grouped splits
of a task, with a report) and ``pretrain`` (a graph encoder on an unlabeled corpus).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from perfcast.faces.cli._common import (
    PANEL_RESEARCH,
    Json,
    MemsimSeed,
    Ray,
    StageProgress,
    Threads,
    Transfer,
    Workers,
    check_workers,
    choices,
    examples,
    err,
    out,
    print_json,
    print_summary,
    split_list,
)
from perfcast.errors import PerfcastError, unknown_choice
from perfcast.paths import check_output_dir
from perfcast.workload import (
    EVAL_SPLITS,
    EVAL_TASKS,
    PREDICTOR_KINDS,
    PRETRAIN_METHODS,
    TRAIN_RECIPES,
)

app = typer.Typer()


@app.command(rich_help_panel=PANEL_RESEARCH, epilog=examples(
    "perfcast train --list",
    "perfcast train --data measurements.db --predictor xgboost --out my-model/",
    "perfcast train --init-from rtx4090-infer-amp-dippm --data my-gpu.csv --out my-model/",
    "perfcast train --recipe default --out my-shipped/"))
def train(
    recipe: Annotated[str | None, typer.Option(
        "--recipe", help=f"Train a recipe's models: {choices(TRAIN_RECIPES)} (or a recipe JSON "
                         f"file) — default = the shipped predictors, llm = the LLM generation "
                         f"models, power = the power model from the Zeus traces, gnnllm = the "
                         f"GNN+LLM stage-1+2 checkpoint.")] = None,
    init_from: Annotated[str | None, typer.Option(
        "--init-from",
        help="Fine-tune this saved predictor (directory) or shipped model id.")] = None,
    data: Annotated[str | None, typer.Option(
        "--data", help="Labeled records: measurement store (.db / URL) or CSV/Parquet in the "
                       "dataset schema (model, device, mode, precision, batch_size, "
                       "time_ms …).")] = None,
    predictor: Annotated[str, typer.Option(
        "--predictor", help=f"Predictor to train on --data: {choices(PREDICTOR_KINDS)}.")
    ] = "xgboost",
    out_dir: Annotated[str | None, typer.Option(
        "--out", help="Output directory (--recipe: default <data home>/models/<recipe>; to "
                      "rebuild the shipped models from a checkout pass --out "
                      "perfcast/shipped).")] = None,
    # a filter on the records (no -d: not the --device of the prediction commands)
    device: Annotated[str | None, typer.Option(
        "--device", help="Only records of this device.")] = None,
    epochs: Annotated[int | None, typer.Option(
        "--epochs", help="Epochs (learned GNN/MLP predictors).")] = None,
    workers: Workers = 2,
    only: Annotated[str | None, typer.Option(
        "--only", help="Recipe: comma-separated entry ids (llm: latency, power, prefill, "
                       "phase-power).")] = None,
    transfer: Transfer = "auto",
    list_models: Annotated[bool, typer.Option(
        "--list", help="List the shipped models and exit.")] = False,
    support_only: Annotated[bool, typer.Option(
        "--support-only", help="--recipe: record each trained model's support (the batches "
                               "and model sizes it was fitted on, outside which the physics "
                               "base answers) from the recipe's records, without refitting.")
    ] = False,
    memsim_seed: MemsimSeed = None,
    corpus: Annotated[str | None, typer.Option(
        "--corpus", help="--recipe gnnllm: the unlabeled graph corpus of stages 1-2 (default "
                         "$PERFCAST_CORPUS or <graph cache>/../corpus, the 20k-graph corpus of "
                         "benchmarks/build_trappm_corpus.sh).")] = None,
    as_json: Json = False,
):
    """Train predictors: a recipe, on your records, or adapted to your GPU.

    `--recipe default` retrains the shipped models (into the data home unless --out); `--data
    D --out DIR` trains a predictor on your records; `--init-from M --data D --out DIR` adapts
    a saved or shipped predictor to your measurements (a few dozen are enough)."""
    from perfcast.training import trainer as T
    from perfcast.shipped import manifest

    if list_models:
        rows = manifest()
        if as_json:
            print_json(rows)
            return
        t = Table("device", "mode", "precision", "targets", "predictor", "records")
        t.add_column("id (for --init-from)", overflow="fold")
        for e in rows:
            t.add_row(e["device"], e["mode"], e["precision"], ",".join(e["targets"]),
                      e["predictor"], str(e.get("trained_on", {}).get("records", "")), e["id"])
        out.print(t)
        return
    check_workers(workers)
    if out_dir:
        check_output_dir(out_dir, option="--out")
    if epochs is not None and epochs <= 0:
        raise PerfcastError(f"epochs must be positive, got {epochs}")
    if memsim_seed and not recipe:
        raise PerfcastError("--memsim-seed seeds the simulations of --recipe; drop it")
    if corpus and recipe != "gnnllm":
        raise PerfcastError("--corpus is for --recipe gnnllm; drop it")
    if support_only and recipe in (None, "power", "gnnllm", "llm"):
        raise PerfcastError("--support-only is for a recipe of per-device models (e.g. --recipe "
                            "default); drop it")
    with StageProgress(hidden=as_json) as prog:
        if support_only:
            res = T.write_supports(recipe, out_dir=out_dir, workers=workers,
                                   only=split_list(only) or None, progress=prog.stages)
            summary = {"recipe": recipe, "out": str(res["out"]),
                       "supports": len(res["supports"]),
                       **{k: v or "none" for k, v in res["supports"].items()}}
        elif recipe == "power":  # the power model of perfcast.energy (perfcast.training.power)
            from perfcast.training.power import train_power

            prog.start("training the power model on the Zeus traces")
            res = train_power(out_dir)
            summary = {"recipe": recipe, "models": 1, "out": res["path"],
                       "records": res["records"], "seconds": res["seconds"]}
        elif recipe == "gnnllm":  # gnnllm stages 1 + 2 (perfcast.training.gnnllm)
            from perfcast.training.gnnllm import train_gnnllm

            res = train_gnnllm(out_dir, corpus=corpus, workers=workers, progress=prog.stages)
            summary = {"recipe": recipe, "models": 1, "out": res["path"],
                       "graphs": res["graphs"], "stage2_graphs": res["stage2_graphs"],
                       "stage1_seconds": res["stage1_seconds"],
                       "stage2_seconds": res["stage2_seconds"], "seconds": res["seconds"]}
        elif recipe == "llm":  # the LLM generation models (perfcast.training.llm)
            from perfcast.training.llm import train_llm

            prog.start("training LLM models")
            res = train_llm(out_dir, only=split_list(only) or None)
            summary = {"recipe": recipe, "models": len(res["models"]),
                       "out": ", ".join(m["path"] for m in res["models"].values()),
                       "seconds": res["seconds"]}
        elif recipe:
            if init_from or data:
                raise PerfcastError("--recipe trains from the public data; drop --init-from/--data")
            res = T.train_recipe(recipe, out_dir=out_dir, workers=workers,
                                 only=split_list(only) or None, progress=prog.stages,
                                 memsim_seed=memsim_seed)
            summary = {"recipe": recipe, "out": str(res["out"]), "models": len(res["models"]),
                       "seconds": res["seconds"]}
        elif init_from:
            if not data or not out_dir:
                raise PerfcastError("--init-from needs --data (your measurements) and --out DIR")
            pred, fs = T.fine_tune(init_from, data, out_dir, device=device, epochs=epochs,
                                   workers=workers, transfer=transfer, progress=prog.stages)
            tr = pred.trained_on_["transfer"]
            summary = {"predictor": pred.name, "init_from": init_from, "records": len(fs),
                       "targets": pred.targets_, "transfer": tr["recipe"],
                       **({"held_out_mape": tr["held_out_mape"]} if "held_out_mape" in tr else {}),
                       "out": out_dir}
        elif data:
            if not out_dir:
                raise PerfcastError("--data needs --out DIR (where the trained predictor goes)")
            from perfcast.datasets import load_labeled

            df = load_labeled(data)
            if device:
                df = df[df["device"].astype(str) == device]
            params = {"epochs": epochs} if epochs else None
            pred, fs = T.fit_frame(df, predictor, params=params, workers=workers,
                                   progress=prog.stages)
            pred.save(out_dir)
            summary = {"predictor": pred.name, "records": len(fs), "targets": pred.targets_,
                       "out": out_dir}
        else:
            raise PerfcastError("give --recipe NAME, --data D --out DIR, or --init-from M --data D "
                                "--out DIR (see perfcast train --help)")
    print_summary(summary, as_json)


def _parse_params(items: list[str] | None, names: list[str]) -> dict[str, dict]:
    """``["dippm.epochs=40", "mlp.lr=0.001"]`` → ``{"dippm": {"epochs": 40}, "mlp": {"lr": 0.001}}``
    (values are JSON when they parse as JSON, else strings)."""
    params: dict[str, dict] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        pname, dot, hp = key.strip().partition(".")
        if not sep or not dot or not pname or not hp:
            raise PerfcastError(f"--param {item!r}: use PREDICTOR.KEY=VALUE, e.g. dippm.epochs=40")
        if pname not in names:
            raise PerfcastError(f"--param {item!r}: {pname} is not among the evaluated predictors "
                                f"({', '.join(names)})")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        params.setdefault(pname, {})[hp.strip()] = value
    return params


def _pm(d: dict, key: str, digits: int = 2, std: bool = True) -> str:
    """``d[key]`` ± ``d[key_std]``, or ``-``."""
    v, s = d.get(key), d.get(f"{key}_std")
    if v is None:
        return "-"
    return f"{v:,.{digits}f}" + (f" ± {s:,.{digits}f}" if std and s is not None else "")


@app.command(rich_help_panel=PANEL_RESEARCH, epilog=examples(
    "perfcast evaluate --task a --split unseen-family --predictors xgboost,roofline",
    "perfcast evaluate --task c-i7 --split family-mc --param mlp.epochs=20 --out reports/eval"))
def evaluate(
    task: Annotated[str, typer.Option(
        "--task", "-t", help=f"Evaluation task: {choices(EVAL_TASKS)} (perfcast.evaluation."
                             f"tasks describes each).", show_default=False)],
    split: Annotated[str, typer.Option(
        "--split", "-s", help=f"How models are split: {choices(EVAL_SPLITS)}.",
        show_default=False)],
    predictors: Annotated[str | None, typer.Option(
        "--predictors", "-p", help=f"Comma-separated predictors from {choices(PREDICTOR_KINDS)} "
                                   f"(default: the task's).")] = None,
    seeds: Annotated[str | None, typer.Option(
        "--seeds", help="Comma-separated split seeds (default 1337-1341; unseen-family "
                        "1337).")] = None,
    out_dir: Annotated[str, typer.Option(
        "--out", help="Report root: writes <out>/<task>/<split>/.")] = "reports/eval",
    workers: Workers = 2,
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="Hyper-parameter PREDICTOR.KEY=VALUE (repeatable), e.g. "
                        "dippm.epochs=40.")] = None,
    folds: Annotated[int, typer.Option("--folds", help="K of the unseen-family split.")] = 5,
    no_build: Annotated[bool, typer.Option(
        "--no-build", help="Do not build missing graphs: records without a graph are dropped "
                           "(counted).")] = False,
    no_plots: Annotated[bool, typer.Option("--no-plots", help="Skip the PNG plots.")] = False,
    memsim_seed: MemsimSeed = None,
    ray: Ray = None,
    as_json: Json = False,
):
    """Judge predictors on held-out models and write a report.

    Fits predictors on model-grouped splits of a task, scores the test parts and writes a report
    (metrics, per-family tables, predictions, plots, summary.md) under <out>/<task>/<split>/
    (--ray: the fits as Ray tasks; a local cluster gets --workers CPUs)."""
    from perfcast.distributed import check_address

    from perfcast.evaluation import SPLITS, get_task
    from perfcast.evaluation import evaluate as run_evaluate
    from perfcast.evaluation.run import check_predictors

    tsk = get_task(task)
    if split not in SPLITS:
        raise unknown_choice("split", split, SPLITS)
    check_workers(workers)
    ray = check_address(ray)
    seed_list = split_list(seeds, int)
    names = ([p.strip() for p in predictors.split(",") if p.strip()] if predictors
             else list(tsk.default_predictors))
    hp = _parse_params(param, names)
    specs = [(n, hp.get(n, {})) for n in names]
    # one-line errors (unknown predictor / hyper-parameter) before any work
    check_predictors(specs, tsk.targets, explicit=predictors is not None)
    check_output_dir(out_dir, option="--out")
    with StageProgress(hidden=as_json) as prog:

        def on_progress(stage: str, i: int, n: int) -> None:
            kind, _, what = stage.partition(" ")
            prog.update({"graphs": "data", "features": "data"}.get(kind, kind), i, n,
                        {"graphs": "building graphs", "features": "features"}.get(
                            kind, f"{kind} {what}".strip()))

        res = run_evaluate(tsk, split, specs, seed_list or None, out_dir=out_dir,
                           progress=on_progress, build_missing=not no_build, workers=workers,
                           k=folds, strict=predictors is not None, plots=not no_plots,
                           memsim_seed=memsim_seed, ray_address=ray)
    for p, msg in res.failures.items():
        err.print(f"warning: {p} failed ({msg}); left out of the report", highlight=False,
                  markup=False)
    if as_json:
        from perfcast.evaluation.report import run_json

        print_json({**run_json(res), "out": str(res.out_dir)})
        return
    for t in res.targets:
        tb = Table(title=f"task {res.task_name} · {split} · {t} "
                         f"(mean ± std over {len(res.seeds)} seed(s))")
        for col in ("predictor", "n", "MAPE %", "fam-avg MAPE %", "RMSE", "Kendall τ", "Acc(10%) %"):
            tb.add_column(col)
        for d in res.overall():
            if d["target"] == t:
                tb.add_row(d["predictor"], _pm(d, "n", 0, std=False), _pm(d, "mape"),
                           _pm(d, "mape_macro"), _pm(d, "rmse", 1), _pm(d, "kendall", 3),
                           _pm(d, "acc10", 1))
        out.print(tb)
    out.print(f"records {len(res.data.fs):,}, models {len(set(res.groups.tolist())):,}, "
              f"families {len(set(res.data.fs.families().tolist())):,}; report: {res.out_dir}")


@app.command(rich_help_panel=PANEL_RESEARCH, epilog=examples(
    "perfcast pretrain --corpus corpus/ --out encoder/ --method gae --epochs 10",
    "perfcast pretrain --corpus corpus/ --out encoder/ --method graphmae --limit 2000 --json"))
def pretrain(
    corpus_dir: Annotated[str, typer.Option(
        "--corpus", help="Unlabeled corpus directory (perfcast corpus --out).",
        show_default=False)],
    out_dir: Annotated[str, typer.Option(
        "--out", help="Encoder directory (encoder.json + encoder.safetensors).",
        show_default=False)],
    method: Annotated[str, typer.Option(
        "--method", help=f"Pre-training method: {choices(PRETRAIN_METHODS)} (gae: TraPPM's "
                         f"graph autoencoder; graphmae: the masked autoencoder).")] = "gae",
    hidden: Annotated[int, typer.Option("--hidden", help="Embedding width c (TraPPM: 512).")] = 128,
    epochs: Annotated[int, typer.Option(
        "--epochs", help="Total epochs (a resumed run continues to this).")] = 10,
    # graphs per minibatch (no -b: not the workload's --batch-size)
    batch_size: Annotated[int, typer.Option("--batch-size", help="Graphs per minibatch.")] = 32,
    lr: Annotated[float, typer.Option("--lr", help="Adam learning rate.")] = 5e-4,
    dropout: Annotated[float | None, typer.Option(
        "--dropout",
        help="Encoder dropout (default: 0.5 for gae as TraPPM, 0.2 graphmae).")] = None,
    final_act: Annotated[bool, typer.Option(
        "--final-act/--linear-out", help="BatchNorm → ReLU → dropout after the last layer too "
                                         "(TraPPM) or a linear output.")] = True,
    limit: Annotated[int | None, typer.Option(
        "--limit", help="Use at most this many graphs.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    resume: Annotated[bool, typer.Option(
        "--resume/--no-resume",
        help="Continue from the checkpoint in --out (default) or start over.")] = True,
    workers: Workers = 2,
    threads: Threads = None,
    as_json: Json = False,
):
    """Pre-train a graph encoder on an unlabeled corpus (for the trappm predictor).

    GAE or GraphMAE; checkpointed every epoch, resumable."""
    from perfcast.pretrain import pretrain as run_pretrain

    check_workers(workers)
    check_output_dir(out_dir, option="--out")
    with StageProgress(hidden=as_json) as prog:
        prog.start("reading corpus")

        def on_progress(i, n, info):
            prog.update("reading corpus", i, n,
                        f"epoch {info['epoch']}/{info['epochs']} loss {info['loss']:.4f}"
                        if info else "reading corpus")

        res = run_pretrain(corpus_dir, out_dir, method=method, hidden=hidden, epochs=epochs,
                           batch_size=batch_size, lr=lr, seed=seed, limit=limit, resume=resume,
                           dropout=dropout, final_act=final_act, n_threads=threads,
                           workers=workers, progress=on_progress)
    summary = {"out": res.out, "method": res.method, "epochs": res.epochs,
               "epochs_run": res.epochs_run,
               "final_loss": round(res.final_loss, 5) if res.final_loss is not None else None,
               "seconds": res.seconds, "seconds_run": res.seconds_run, "graphs": res.graphs,
               "nodes": res.nodes, "encoder_mb": res.encoder_mb}
    if as_json:
        print_json(summary)
        return
    t = Table(title=f"{res.method} encoder → {res.out}", show_header=False)
    t.add_row("epochs done", f"{res.epochs} ({res.epochs_run} in this run)")
    t.add_row("final loss", "-" if res.final_loss is None else f"{res.final_loss:.5f}")
    t.add_row("training time", f"{res.seconds:,.1f} s ({res.seconds_run:,.1f} s in this run)")
    t.add_row("corpus", f"{res.graphs:,} graphs, {res.nodes:,} nodes")
    t.add_row("encoder.safetensors", f"{res.encoder_mb:.2f} MB")
    out.print(t)
