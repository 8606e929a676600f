"""Evaluation harness: tasks (record selections + targets + published numbers), model-grouped
splits (random / per-family Monte Carlo / leave-family-out), metrics, the runner and its reports.

    from perfcast.evaluation import evaluate
    res = evaluate("a", "family-mc", ["xgboost", "mlp"])   # → reports/eval/a/family-mc/

CLI: ``perfcast evaluate --task a --split unseen-family --predictors dippm,xgboost``.
"""

from perfcast.evaluation.metrics import (
    METRICS,
    acc_within,
    kendall_tau,
    mape,
    metrics_by_group,
    regression_metrics,
    rmse,
)
from perfcast.evaluation.run import EvalResult, evaluate, score
from perfcast.evaluation.splits import DEFAULT_SEEDS, SPLITS, Fold, make_splits, model_groups
from perfcast.evaluation.tasks import TASKS, Published, Task, TaskData, get_task, list_tasks

__all__ = ["METRICS", "acc_within", "kendall_tau", "mape", "metrics_by_group",
           "regression_metrics", "rmse", "EvalResult", "evaluate", "score", "DEFAULT_SEEDS",
           "SPLITS", "Fold", "make_splits", "model_groups", "TASKS", "Published", "Task",
           "TaskData", "get_task", "list_tasks"]
