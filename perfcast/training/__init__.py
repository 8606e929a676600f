"""Training: the recipes that build the shipped predictors (:mod:`~perfcast.training.trainer`,
``recipes/*.json``), fine-tuning on a user's records, and the shipped models themselves
(:mod:`~perfcast.training.shipped`, ``shipped/``: package data, read at prediction time)."""
