"""The allowed values of the commands' own options (not the request's), one set each: the
modules acting on them check against these, and the CLI help lists them from here — so a help
text cannot name a value the code refuses, or miss one it takes (tests/test_cli_help.py)."""

from __future__ import annotations

#: Which predicted memory ``fit`` and ``mig`` plan with: ``safe`` the interval's upper bound,
#: ``central`` the point estimate, ``optimistic`` the lower bound.
RISKS = ("safe", "central", "optimistic")
#: What ``rank`` orders the devices by: time per batch, USD or kWh of the job.
OBJECTIVES = ("time", "cost", "energy")
#: How ``perfcast train --init-from`` and ``perfcast calibrate`` adapt a predictor to new
#: records: ``auto`` (the best of the others on held-out models), ``finetune``,
#: ``recalibrate`` (log y = a + b·log ŷ) or ``scratch``.
TRANSFER_RECIPES = ("auto", "finetune", "recalibrate", "scratch")
#: Graph-encoder pre-training methods: TraPPM's graph autoencoder and the masked GraphMAE.
PRETRAIN_METHODS = ("gae", "graphmae")
#: The predictor kinds perfcast registers (:func:`perfcast.predictors.list_predictors`; a
#: test keeps the two equal).
PREDICTOR_KINDS = ("crossdevice", "dippm", "dippm-gat", "dippm-gcn", "dippm-gin", "dnnperf",
                   "gnnllm", "kernelsum", "memsim", "mlp", "nnlqp", "roofline", "trappm",
                   "xgboost")
#: Training recipes of ``perfcast train --recipe``: ``default`` (the shipped predictors, from
#: ``perfcast/training/recipes/default.json``; a recipe JSON file works too), ``llm`` (the LLM
#: generation models), ``power`` (the power model) and ``gnnllm`` (the GNN+LLM checkpoint).
TRAIN_RECIPES = ("default", "llm", "power", "gnnllm")
#: Evaluation tasks (:data:`perfcast.evaluation.tasks.TASKS` describes each) and splits
#: (:data:`perfcast.evaluation.splits.SPLITS`); a test keeps the names equal.
EVAL_TASKS = ("a", "b", "b-pt291", "rtx3090-infer", "c-i9", "c-i7", "d", "e", "e-nosim", "gpu")
EVAL_SPLITS = ("random", "family-mc", "unseen-family", "unseen-device")

__all__ = ["EVAL_SPLITS", "EVAL_TASKS", "OBJECTIVES", "PREDICTOR_KINDS", "PRETRAIN_METHODS",
           "RISKS", "TRAIN_RECIPES", "TRANSFER_RECIPES"]
