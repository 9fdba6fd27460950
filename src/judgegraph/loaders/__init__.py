"""Read conversation files of several formats into :class:`Conversation` objects.

Supported files (by extension, case-insensitive):

* ``.jsonl`` - one record per line; blank lines and lines starting with ``//``
  are skipped. Read line by line, so memory stays bounded.
* ``.json`` / ``.yaml`` / ``.yml`` - one record, a list of records,
  ``{"conversations": [...]}``, or a promptfoo document (top-level ``tests:``).
  A ``.json`` list is read one record at a time too (:mod:`.jsonstream`).

Each record's format is detected on its own (:func:`detect_format`); one module
per format lives in :mod:`judgegraph.loaders.formats`.

Problems never raise while reading: every bad file or record becomes an
:class:`InputError` naming the file, the line (or record index) and the field,
and reading continues with the next record.
"""

from __future__ import annotations

from .base import InputError, InputFormatError, LoadedConversation, LoadResult
from .detect import FORMATS, detect_format
from .files import id_stems, iter_records, load_conversations, load_file, load_files
from .formats.promptfoo_rules import ResultTransform, result_transform

__all__ = [
    "FORMATS",
    "InputError",
    "InputFormatError",
    "LoadResult",
    "LoadedConversation",
    "ResultTransform",
    "detect_format",
    "id_stems",
    "iter_records",
    "load_conversations",
    "load_file",
    "load_files",
    "result_transform",
]
