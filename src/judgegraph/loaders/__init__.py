"""Read conversation files (``.jsonl`` line by line; ``.json``, ``.yaml``, ``.yml``), each record's format detected
on its own (one module per format in :mod:`judgegraph.loaders.formats`; docs/input_formats.md). Reading never
raises: every problem is an :class:`InputError` naming the file, line (or record) and field."""

from __future__ import annotations

from .base import InputError, InputFormatError, LoadedConversation, LoadResult
from .detect import FORMATS, detect_format
from .files import id_stems, iter_records, load_conversations, load_file, load_files
from .formats.promptfoo import ResultTransform, result_transform

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
