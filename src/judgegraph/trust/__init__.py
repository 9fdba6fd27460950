"""Can I trust this judge? How a judge's verdicts compare with people's labels (:func:`agreement`)."""

from .agreement import AgreementReport, MetricAgreement, Pair, Unmatched, agreement
from .labels import Label, LabelError, LabelSet, read_labels, review_labels

__all__ = ["AgreementReport", "Label", "LabelError", "LabelSet", "MetricAgreement", "Pair", "Unmatched", "agreement",
           "read_labels", "review_labels"]
