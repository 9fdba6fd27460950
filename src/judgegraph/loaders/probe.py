"""Whether a server answers at all, asked once with a short deadline (clients of their own retry a refused
connection for minutes): the MLflow tracking server and the LangGraph server are checked this way."""

from __future__ import annotations

import urllib.error
import urllib.request


def no_answer(url: str, path: str, timeout: float = 5.0) -> str | None:
    """Why nothing answered at ``url`` + ``path`` (refused, unknown host, timed out, a bad URL), or None when
    something did, even with an HTTP error."""
    try:
        urllib.request.urlopen(url.rstrip("/") + path, timeout=timeout).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(getattr(exc, "reason", exc))
    return None
