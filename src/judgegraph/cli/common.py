"""What several subcommands share: exit statuses and option readers."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    #: what each subcommand module's ``register`` adds its parser to
    Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ERRORS = 0, 1, 2, 3

#: the most judge calls (``--concurrency``) or simulated conversations a command runs at
#: once: each one in flight holds its conversation, prompt and reply in memory (measured:
#: 213 MB at 16 and 1.46 GB at 100,000 on 10,000 conversations), and no judge server
#: serves more; a larger value is refused (exit 2), never silently cut
MAX_CONCURRENCY = 1024


def read_text_option(flag: str, path: str | Path) -> str:
    """The text of a file an option names; ValueError naming the option and the
    file when it cannot be read or is not UTF-8 (a usage error, never a crash)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{flag} {path}: not valid UTF-8 (byte {exc.start + 1})") from None
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot read it: {exc.strerror or exc}") from None


def read_guidelines(values: list[str] | None) -> list[str] | None:
    """``--guideline`` values: text, or ``@FILE`` for one guideline per line."""
    if not values:
        return None
    out: list[str] = []
    for value in values:
        if value.startswith("@"):
            text = read_text_option("--guideline", value[1:])
            out.extend(line.strip() for line in text.splitlines() if line.strip())
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
        return read_text_option("--rubric", value[1:])
    return value


def bad_base_url(value: str | None) -> str | None:
    """What is wrong with a ``--base-url`` (checked before any work), or None."""
    if value is None:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        return f"--base-url {value!r} is not a valid URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--base-url {value!r} must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8000/v1"
    return None


def os_error_message(exc: OSError) -> str:
    """An environment error (full disk, unwritable path...) as one line naming the file."""
    text = exc.strerror or str(exc)
    return f"{exc.filename}: {text}" if exc.filename else text


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
