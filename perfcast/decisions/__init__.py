"""Decisions built on predictions: MIG profile, largest batch that fits, cost and carbon, a
ranking of devices, the GPU power limit and the layout of a training step over GPUs (plan).
Each returns a typed dataclass with ``to_dict()``."""

from perfcast.decisions.cost import CostEstimate, estimate_cost
from perfcast.decisions.fit import FitResult, max_batch_size
from perfcast.decisions.mig import MigAdvice, MigProfile, mig_profiles, recommend_mig
from perfcast.decisions.plan import Plan, PlanRow, plan
from perfcast.decisions.power_limit import PowerLimitChoice, choose_power_limit
from perfcast.decisions.rank import DeviceRank, Ranking, rank

__all__ = ["recommend_mig", "MigAdvice", "MigProfile", "mig_profiles", "max_batch_size",
           "FitResult", "estimate_cost", "CostEstimate", "rank", "Ranking", "DeviceRank",
           "choose_power_limit", "PowerLimitChoice", "plan", "Plan", "PlanRow"]
