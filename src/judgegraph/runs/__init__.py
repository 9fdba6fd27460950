"""A run's record: the typed lines of a results file (:mod:`.record`) and the one reader, :func:`read_run`."""

from . import read, record
from .read import *  # noqa: F403 - the package exports each module's public names, listed there
from .record import *  # noqa: F403

__all__ = [*read.__all__, *record.__all__]
