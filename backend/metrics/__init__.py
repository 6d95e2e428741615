"""Prometheus metrics of the manager: the series (series.py); GET /api/metrics is
backend.api.metrics."""

from backend.metrics.series import ManagerMetrics

__all__ = ["ManagerMetrics"]
