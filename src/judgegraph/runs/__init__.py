"""A run's record: the typed lines of a results file (:mod:`.record`) and the one reader, :func:`read_run`."""

from .read import (
    NOT_RESULTS,
    NotAResultsFile,
    RunFacts,
    RunFile,
    conversation_problem,
    first_record,
    is_results_file,
    read_header,
    read_run,
)
from .record import (
    RECORD_TYPES,
    STATUSES,
    BatchLine,
    ConversationLine,
    HeaderLine,
    InputErrorLine,
    PairwiseLine,
    RecordType,
    ResultLine,
    SummaryLine,
    UsageLine,
    VerdictLine,
)

__all__ = ["NOT_RESULTS", "RECORD_TYPES", "STATUSES", "BatchLine", "ConversationLine", "HeaderLine",
           "InputErrorLine", "NotAResultsFile", "PairwiseLine", "RecordType", "ResultLine", "RunFacts", "RunFile", "SummaryLine",
           "UsageLine", "VerdictLine", "conversation_problem", "first_record", "is_results_file", "read_header", "read_run"]
