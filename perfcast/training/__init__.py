"""Training (research stack): the recipes that build the shipped predictors
(:mod:`~perfcast.training.trainer`, ``recipes/*.json``), the LLM, power and GNN+LLM recipes,
fine-tuning on a user's records and ``perfcast calibrate``. The models they build are read at
prediction time by the runtime room :mod:`perfcast.shipped` (``perfcast/shipped/``), which
never imports this one."""
