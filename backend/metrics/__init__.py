"""Prometheus metrics of the manager: the series (series.py) and GET /api/metrics (route.py)."""

from backend.metrics.route import router
from backend.metrics.series import ManagerMetrics

__all__ = ["ManagerMetrics", "router"]
