"""Measurement storage: :class:`MeasurementStore` (SQLite by default, any SQLAlchemy URL)."""

from perfcast.store.db import (
                               STATUSES,
                               MeasureConfig,
                               Measurement,
                               MeasurementStore,
                               config_key,
)

__all__ = ["STATUSES", "Measurement", "MeasureConfig", "MeasurementStore", "config_key"]
