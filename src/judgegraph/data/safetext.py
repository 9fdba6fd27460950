"""Text from data (ids, replies, reasons, error messages, paths) made safe to print on a terminal or in Markdown:
every command and output that prints data uses :func:`safe`."""

from __future__ import annotations

__all__ = ["safe"]


def safe(text: object) -> str:
    """``text`` with control characters (ANSI escapes included) and lone surrogates shown as visible escapes. Print
    the result as a ``rich.text.Text`` (or escape it) so ``[bold]`` and ``[/]`` stay literal."""
    s = str(text)
    if s.isprintable():
        return s
    return "".join(
        ch if ch in "\n\t " or ch.isprintable()
        else f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else ch.encode("unicode_escape").decode("ascii")  # \uXXXX, \UXXXXXXXX
        for ch in s
    )
