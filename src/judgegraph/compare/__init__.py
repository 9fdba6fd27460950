"""Did the new version get better? Two runs compared: :func:`diff_runs` (``judgegraph diff``)."""

from ..stats.paired import McNemar, MeanDifference, mcnemar, paired_bootstrap
from .diff import KINDS, MetricDiff, Pair, PassRate, RunDiff, Side, VerdictChange, VerdictSide, diff_runs
from .settings import Difference, SettingsComparison

__all__ = ["KINDS", "Difference", "McNemar", "MeanDifference", "MetricDiff", "Pair", "PassRate", "RunDiff",
           "SettingsComparison", "Side", "VerdictChange", "VerdictSide", "diff_runs", "mcnemar", "paired_bootstrap"]
