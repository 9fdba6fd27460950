"""The viewer's web application (Starlette): the runs page ``/``, a run's report ``/run``, two runs side by side
``/compare``, the label queue ``/label`` and people's agreement ``/trust``.

Safe by default: on 127.0.0.1 only requests naming that host (or ``localhost``) are served, so a page elsewhere
cannot reach it through DNS rebinding; on any other host every request needs the token (``?token=`` once, then
a cookie, or the ``X-Judgegraph-Token`` header), else 403. A POST needs the page's CSRF token in its
``X-CSRF-Token`` header and is refused when the browser says it comes from another site (``Sec-Fetch-Site``,
``Origin``). Pages are Jinja2 templates with autoescape: conversation text is always data."""

from __future__ import annotations

import secrets
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

from jinja2 import Environment, PackageLoader
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..runs import NotAResultsFile
from .queue import STRATEGIES, LabelsFile, Strategy, build_queue, people_agreement
from .runs import Library, Run, trends

TOKEN_COOKIE = "judgegraph_token"
LOOPBACK = "127.0.0.1"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


@dataclass
class Settings:
    paths: list[str]
    labels: str
    token: str | None = None  # required on every request when set (``judgegraph view`` on any host but 127.0.0.1)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))


async def guard(s: Settings, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """The token, the host and the cross-site rules of the module docstring (the app's middleware)."""
    set_cookie = False
    if s.token is None:
        if request.url.hostname not in (LOOPBACK, "localhost"):
            return PlainTextResponse("forbidden: unexpected Host", status_code=403)
    else:
        given = (request.headers.get("x-judgegraph-token") or request.cookies.get(TOKEN_COOKIE)
                 or request.query_params.get("token") or "")
        if not secrets.compare_digest(given.encode(), s.token.encode()):
            return PlainTextResponse("forbidden: this server needs its token (printed when it started)",
                                     status_code=403)
        set_cookie = request.query_params.get("token") is not None
    if request.method not in ("GET", "HEAD"):
        site = request.headers.get("sec-fetch-site")
        origin = request.headers.get("origin")
        if site not in (None, "same-origin", "none") or (
                origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}"):
            return PlainTextResponse("forbidden: cross-site request", status_code=403)
        if not secrets.compare_digest(request.headers.get("x-csrf-token", "").encode(), s.csrf.encode()):
            return PlainTextResponse("forbidden: missing or wrong CSRF token", status_code=403)
    response = await call_next(request)
    if set_cookie and s.token is not None:
        response.set_cookie(TOKEN_COOKIE, s.token, httponly=True, samesite="strict")
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


def create_app(settings: Settings) -> Starlette:
    """The viewer over ``settings.paths`` (results files and folders), appending labels to ``settings.labels``."""
    library = Library(settings.paths)
    labels = LabelsFile(settings.labels)
    env = Environment(loader=PackageLoader("judgegraph.view", "templates"), autoescape=True)
    turns_cache: dict[str, dict[str, list[dict[str, str]]]] = {}

    def page(name: str, **values: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(csrf=settings.csrf, **values))

    def chosen(request: Request, runs: list[Run]) -> Run | None:
        key = request.query_params.get("run")
        return next((r for r in runs if r.key == key), None) if key else (runs[0] if runs else None)

    async def index(request: Request) -> Response:
        runs, problems = library.runs()
        metrics = list(dict.fromkeys(m for r in runs for m in r.facts.pass_rate))
        return page("runs.html", runs=runs, metrics=metrics, problems=problems, trends=trends(runs, metrics))

    async def report(request: Request) -> Response:
        from ..outputs.html import report_html

        runs, _ = library.runs()
        known = {r.key for r in runs}
        keys = request.query_params.getlist("run")
        if not keys or len(keys) > 2 or any(k not in known for k in keys):
            return PlainTextResponse("pick one run, or two to compare, from the runs page", status_code=404)
        html = report_html([library.read(k) for k in keys])[0]  # not a results file: ``unreadable`` (404)
        # the report carries its own Content-Security-Policy (inline script and style, nothing fetched)
        return HTMLResponse(html, headers={"Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; "
                                           "style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"})

    def queue(request: Request) -> tuple[Run | None, list[Any], Strategy]:
        runs, _ = library.runs()
        run = chosen(request, runs)
        strategy = cast(Strategy, request.query_params.get("strategy", "disagreement"))
        if run is None or strategy not in STRATEGIES:
            return run, [], strategy
        return run, build_queue(library.read(run.key).conversations.values(), strategy), strategy

    def context(run: Run, conversation_id: str) -> list[dict[str, str]]:
        from ..outputs.html import recorded_turns

        if run.key not in turns_cache:
            turns_cache.clear()
            turns_cache[run.key] = recorded_turns(library.read(run.key))
        return turns_cache[run.key].get(conversation_id) or []

    async def label_page(request: Request) -> Response:
        from ..metrics import registry

        annotator = request.query_params.get("annotator", "").strip()
        run, items, strategy = queue(request)
        read = labels.read()
        base = {"annotator": annotator, "strategy": strategy, "strategies": STRATEGIES, "run": run,
                "reveal": request.query_params.get("reveal") == "1", "labels_file": settings.labels,
                "problems": [str(e) for e in read.errors]}
        if not annotator or run is None:
            return page("label.html", item=None, **base)
        done = labels.labelled(annotator, read)
        raw = request.query_params.get("i")
        i = int(raw) if raw and raw.isdigit() else next((n for n, it in enumerate(items) if it.key not in done),
                                                         len(items))
        i = min(i, len(items))
        item = items[i] if i < len(items) else None
        shown = context(run, item.conversation_id) if item is not None else []
        if item is not None and item.turns:
            shown = shown[: max(item.turns)]
        spec = registry().get(item.metric) if item else None
        return page("label.html", item=item, i=i, n=len(items), labelled=sum(it.key in done for it in items),
                    given=done.get(item.key) if item else None, turns=shown,
                    question=spec.summary if spec else (item.metric if item else ""), **base)

    async def label_post(request: Request) -> Response:
        try:
            body = await request.json()
            annotator, value, i = str(body["annotator"]).strip(), body["label"], int(body["i"])
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": "expected JSON {annotator, label, i}"}, status_code=400)
        if not annotator or value not in ("yes", "no"):
            return JSONResponse({"error": "an annotator and a label yes or no"}, status_code=400)
        _, items, _ = queue(request)
        if not 0 <= i < len(items):
            return JSONResponse({"error": f"no item {i}"}, status_code=400)
        if "key" in body and body["key"] != list(items[i].key):  # the results file changed under the page
            return JSONResponse({"error": "the queue changed (its results file was written): reload"}, status_code=409)
        try:
            record = labels.append(items[i], value, annotator)
        except OSError as exc:  # the labels file cannot be written: said where the person labels
            return JSONResponse({"error": f"{settings.labels}: cannot be written: {exc.strerror or exc}"},
                                status_code=500)
        return JSONResponse({"written": record, "judge": items[i].judge, "reason": items[i].reason})

    async def trust(request: Request) -> Response:
        runs, problems = library.runs()
        run = chosen(request, runs)
        read = labels.read()
        people = people_agreement(read.labels)
        judge = None
        command = ""
        if run is not None and read.labels:
            from ..trust.agreement import agreement

            whole = library.read(run.key)
            judge = agreement(whole, read, reviews=False, resamples=0)
            entries = whole.header.inputs if whole.header is not None else None
            inputs = [str(e["path"]) for e in entries if isinstance(e, dict) and e.get("path")] \
                if isinstance(entries, list) else []
            metric = next(iter(judge.metrics), None) or (whole.metrics[0] if whole.metrics else "turn_relevancy")
            command = shlex.join(["judgegraph", "align", *(inputs or ["CONVERSATIONS.jsonl"]), "--metric", metric,
                                  "--labels", settings.labels, "--out", "aligned"])
        return page("trust.html", run=run, runs=runs, people=people, judge=judge, command=command,
                    problems=problems, label_errors=[str(e) for e in read.errors], labels_file=settings.labels)

    async def unreadable(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(exc), status_code=404)  # a run that changed into something unreadable

    routes = [Route("/", index), Route("/run", report), Route("/compare", report),
              Route("/label", label_page, methods=["GET"]), Route("/label", label_post, methods=["POST"]),
              Route("/trust", trust), Mount("/assets", StaticFiles(packages=[("judgegraph.view", "assets")]))]
    return Starlette(routes=routes, exception_handlers={NotAResultsFile: unreadable},
                     middleware=[Middleware(BaseHTTPMiddleware, dispatch=partial(guard, settings))])
