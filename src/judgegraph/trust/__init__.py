"""Can I trust this judge? How a judge's verdicts compare with people's labels (:func:`agreement`), and how
stable they are across repeats and among a jury's judges (:func:`stability`)."""

from .agreement import AgreementReport, MetricAgreement, Pair, Unmatched, agreement
from .labels import Label, LabelError, LabelSet, read_labels, review_labels
from .stability import StabilityReport, merge_runs, read_stability, stability, stable_gate

__all__ = ["AgreementReport", "Label", "LabelError", "LabelSet", "MetricAgreement", "Pair", "Unmatched", "agreement",
           "read_labels", "review_labels",
           "StabilityReport", "merge_runs", "read_stability", "stability", "stable_gate"]
