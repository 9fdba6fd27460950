"""What several subcommands share: exit statuses and option readers."""

from __future__ import annotations

import os
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


#: What a command line user is told when conversational-guidelines has no guideline (the library's own
#: message speaks Python: ``guidelines=[...]``).
GUIDELINES_NEEDED = ("conversational-guidelines needs at least one --guideline TEXT (repeatable; --guideline @FILE "
                     "reads one guideline per line), e.g. --guideline 'Apologise when the user reports a problem.'")


def guidelines_missing(metrics: list[str] | None, guidelines: list[str] | None) -> str | None:
    """:data:`GUIDELINES_NEEDED` when ``metrics`` include conversational-guidelines and no guideline is given."""
    from ..metrics import canonical_name

    if not guidelines and any(canonical_name(m) == "conversational_guidelines" for m in metrics or ()):
        return GUIDELINES_NEEDED
    return None


def base_url(flag: str | None, model: str | None) -> str | None:
    """The server an LLM judge built from ``model`` talks to: ``--base-url``,
    else, for an OpenAI model (``openai:...`` or a bare name), ``$OPENAI_BASE_URL``
    as the openai client itself reads it (so a key-less local server works and
    the run header and errors can name it)."""
    if flag:
        return flag
    env = os.environ.get("OPENAI_BASE_URL", "").strip()
    if env and isinstance(model, str) and (":" not in model or model.split(":", 1)[0] == "openai"):
        return env
    return None


def read_rubric(value: str | None) -> str | None:
    """``--rubric`` value: text, or ``@FILE`` to read it from a file."""
    if value and value.startswith("@"):
        return Path(value[1:]).read_text(encoding="utf-8")
    return value


EXIT_INTERNAL, EXIT_INTERRUPTED = 4, 130


def safe(text: object) -> str:
    """Text from data (ids, replies, reasons, error messages, paths) made safe to
    print: control characters (ANSI escapes included) and lone surrogates shown
    as visible escapes, never sent raw to the terminal. Print the result as a
    ``rich.text.Text`` (or escape it) so ``[bold]`` and ``[/]`` stay literal."""
    s = str(text)
    if s.isprintable():
        return s
    out = []
    for ch in s:
        if ch in "\n\t" or ch.isprintable() or ch == " ":
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


def markup_safe(text: object) -> str:
    """:func:`safe`, escaped for a rich markup string (``[/]`` printed literally)."""
    from rich.markup import escape

    return escape(safe(text))
