"""What several subcommands share: exit statuses and option readers."""

from __future__ import annotations

from pathlib import Path

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ERRORS = 0, 1, 2, 3


def read_guidelines(values: list[str] | None) -> list[str] | None:
    """``--guideline`` values: text, or ``@FILE`` for one guideline per line."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            out.extend(line.strip() for line in Path(value[1:]).read_text(encoding="utf-8").splitlines() if line.strip())
        else:
            out.append(value)
    return out


def read_rubric(value: str | None) -> str | None:
    """``--rubric`` value: text, or ``@FILE`` to read it from a file."""
    if value and value.startswith("@"):
        return Path(value[1:]).read_text(encoding="utf-8")
    return value
