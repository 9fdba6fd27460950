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
