"""The web viewer's routes: a Starlette app over one `Archive`, pages rendered by Jinja2.

Design idea: a thin shell like the CLI. Each handler parses its parameters
(`views.parse_*`, one clear `BadInput` for anything wrong), calls one or two
`Archive` methods and renders a template; there is no SQL here. Handlers are
`async def` and call the synchronous archive inline: one connection, used by one
request at a time (apsw and psycopg connections are not shared across threads),
and every page is a few milliseconds of work. Errors become one message page
with the right status, never a traceback.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...archive import OVERVIEW_DAYS, PAGE_BYTES, REVIEW_MIN_COUNT, Archive, MessageDetail, Overview
from ...core.markdown import render_markdown
from ...errors import ArchiveError, BadInput, NotFound
from . import security, views

HERE = Path(__file__).parent
SESSION_PAGE = 50  # messages per session page (the archive's read window allows 50 either side)
AT_BEFORE = 10  # messages shown above a message opened from a search hit
RUNS_PER_SESSION = 1000
MEMORY_ACTIONS = ("forget", "confirm")
OVERVIEW_TTL_S = 30  # the overview's totals cost ~100 ms at 1M messages: computed at most this often


@dataclass
class Settings:
    write: bool = False  # state-changing actions (forget, confirm) allowed
    token: str | None = None  # required from every client when set
    allowed_hosts: set[str] | None = None  # Host header values accepted; None: any
    csrf: str = field(default_factory=security.new_secret)


def templates() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(when=views.when, size=views.size, highlight=views.highlight, fold_title=views.fold_title)
    env.globals.update(is_tool_message=views.is_tool_message, strip_hit_marks=views.strip_hit_marks)
    env.globals.update(short=views.short_id, readable_tool_text=views.readable_tool_text)
    # Markdown of archived text: the renderer escapes every HTML tag in it (core.markdown), so its
    # output is the one value marked safe
    env.filters["markdown"] = lambda text: Markup(render_markdown(str(text)))
    return env


class Viewer:
    """The handlers, holding the archive, the settings and the template environment."""

    def __init__(self, archive: Archive, settings: Settings) -> None:
        self.archive = archive
        self.settings = settings
        self.env = templates()
        self._overviews: dict[int, tuple[int, Overview]] = {}
        self._timelines: dict[tuple[str, str], tuple[float, Any]] = {}

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        context.update(request=request, settings=self.settings, team=self.archive.is_team, nav=name.split(".")[0])
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status)

    def message(self, request: Request, status: int, title: str, text: str) -> HTMLResponse:
        return self.render(request, "message.html", status=status, title=title, text=text)

    def overview_figures(self, days: int) -> tuple[int, Overview]:
        """The overview, computed at most once per `OVERVIEW_TTL_S` (its totals count whole indexes)."""
        now = time.time()
        cached = self._overviews.get(days)
        if cached is None or now - cached[0] / 1000 > OVERVIEW_TTL_S:
            cached = (int(now * 1000), self.archive.overview(days))
            self._overviews = {days: cached}
        return cached

    # --- pages --------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        days = views.parse_int(request.query_params, "days", OVERVIEW_DAYS, 1, 366)
        computed_ms, ov = self.overview_figures(days)
        return self.render(
            request,
            "overview.html",
            ov=ov,
            computed_ms=computed_ms,
            ttl=OVERVIEW_TTL_S,
            day_plot=views.day_plot(ov.per_day),
            project_plot=views.group_plot(ov.per_project),
            agent_plot=views.group_plot(ov.sessions_per_agent),
        )

    async def search(self, request: Request) -> Response:
        params = views.parse_search(request.query_params)
        shown = views.result_page(self.run_search(params), params)
        groups = views.group_by_session(shown.items) if params.track == "messages" else []
        addresses = self.archive.run_addresses(h.msg_id for h in shown.items) if groups else {}
        name = "_results.html" if request.query_params.get("partial") else "search.html"
        return self.render(
            request, name, p=params, results=shown.items, shown=shown, groups=groups, addresses=addresses
        )

    def run_search(self, p: views.SearchParams) -> list[Any]:
        """Up to `SEARCH_FETCH` results, best first: the page shown is cut from them."""
        a, fetch = self.archive, views.SEARCH_FETCH
        if p.track == "sessions":
            if not p.q:
                return list(a.sessions(agent=p.agent or None, project=p.project or None, limit=fetch))
            return list(
                a.search_sessions(
                    p.q,
                    limit=fetch,
                    project=p.project or None,
                    since=p.since or None,
                    include_echoes=bool(p.echoes),
                    mode=p.mode or None,
                )
            )
        if not p.q:
            return []
        scope = "summary" if p.track == "runs" else "content"
        kinds = (p.kind,) if p.kind else ()
        found = a.search(
            p.q,
            fetch,
            project=p.project,
            since=p.since or None,
            path=p.path,
            agent=p.agent or None,
            scope=scope,
            kinds=kinds,
            until=p.until or None,
            include_echoes=bool(p.echoes),
            mode=p.mode or None,  # both tracks: run summaries have vectors too
        )
        return list(found)

    async def session(self, request: Request) -> Response:
        sid = self.archive.resolve_session(request.path_params["sid"])
        window = self.session_window(sid, request.query_params)
        msgs = window.messages
        addresses = self.archive.run_addresses(m.msg_id for m in msgs)
        run_ids = {int(addr.split("/")[0][1:]) for addr in addresses.values()}
        runs = {r.id: r for r in self.archive.runs(session=sid, limit=RUNS_PER_SESSION) if r.id in run_ids}
        pages = {m.msg_id: views.first_page(m.text, PAGE_BYTES) for m in msgs}
        return self.render(
            request,
            "session.html",
            w=window,
            addresses=addresses,
            runs=runs,
            pages=pages,
            page_bytes=PAGE_BYTES,
            resume=self.archive.resume(sid),
        )

    def session_window(self, sid: str, query: Any) -> Any:
        at, start, end = (views.parse_int(query, k, 0, 1, 2**62) or None for k in ("at", "start", "end"))
        if at:
            return self.archive.read(sid, around=at, before=AT_BEFORE, after=SESSION_PAGE - AT_BEFORE)
        if start:
            return self.archive.read(sid, around=start, before=0, after=SESSION_PAGE)
        if end:
            return self.archive.read(sid, around=end, before=SESSION_PAGE, after=0)
        if query.get("last"):
            return self.archive.read(sid, before=SESSION_PAGE, after=0)
        return self.archive.read(sid, before=0, after=SESSION_PAGE, from_start=True)

    async def read(self, request: Request) -> Response:
        address = request.path_params["address"]
        offset = views.parse_int(request.query_params, "offset", 0, 0, 2**62)
        raw = bool(request.query_params.get("raw"))
        found = self.archive.read_address(address, offset=offset, raw=raw)
        if isinstance(found, MessageDetail):
            return self.render(request, "detail.html", d=found, address=address)
        changed = self.archive.changed_files(found.run.address)
        return self.render(request, "run.html", rw=found, address=address, changed=changed)

    async def timeline(self, request: Request) -> Response:
        q = request.query_params
        agent, project, day = (q.get("agent") or "").strip(), (q.get("project") or "").strip(), q.get("day")
        if agent:
            views.parse_search({"agent": agent})  # one vocabulary, one message for a bad one
        t = copy.copy(self.timeline_figures(project, agent))
        if day:
            t.runs = self.archive.day_runs(day, project=project, agent=agent)
            t.day = views.day_start(day)
        return self.render(request, "timeline.html", t=t, plot=views.timeline_plot(t.days, t.agents))

    def timeline_figures(self, project: str, agent: str) -> Any:
        """The timeline of a filter, computed at most once per `OVERVIEW_TTL_S` (it reads every run)."""
        now = time.time()
        cached = self._timelines.get((project, agent))
        if cached is None or now - cached[0] > OVERVIEW_TTL_S:
            cached = (now, self.archive.timeline(project=project, agent=agent))
            self._timelines[(project, agent)] = cached
        return cached[1]

    async def file(self, request: Request) -> Response:
        """A file an archived session changed, each line with the run that wrote it."""
        path = (request.query_params.get("path") or "").strip()
        if not path.startswith("/"):
            raise BadInput("give the file's absolute path (path=/...)")
        blame = self.archive.blame(path, require_edits=True)
        history = self.archive.file_history(path)
        return self.render(request, "file.html", b=blame, rows=views.blame_rows(blame.lines), history=history)

    async def export(self, request: Request) -> Response:
        """A session or run as a download: Markdown, self-contained HTML or JSON."""
        fmt = request.query_params.get("format") or "html"
        target = request.path_params["target"]
        text = self.archive.export(target, fmt=fmt, thinking=bool(request.query_params.get("thinking")))
        media = {"md": "text/markdown", "html": "text/html", "json": "application/json"}[fmt]
        stem = target if self.archive.is_address(target) else views.short_id(target)
        name = "pi-memory-" + re.sub(r"[^\w-]", "_", stem) + "." + fmt
        headers = {"Content-Disposition": f'attachment; filename="{name}"'}
        return Response(text, media_type=f"{media}; charset=utf-8", headers=headers)

    async def review(self, request: Request) -> Response:
        p = views.parse_review(request.query_params, REVIEW_MIN_COUNT)
        report = self.archive.review(
            since=p.since or None,
            until=p.until or None,
            project=p.project or None,
            agent=p.agent or None,
            min_count=p.min_count,
            cwd=p.workspace,
        )
        charts = [views.ledger_plot(row) for row in report.ledger]
        return self.render(request, "review.html", p=p, r=report, charts=charts)

    async def usage(self, request: Request) -> Response:
        from ...archive.present import usage_cells
        from .usage_views import day_series, share_plot

        p = views.parse_review(request.query_params, REVIEW_MIN_COUNT)  # since, until, agent: the same checks
        window = {"since": p.since or None, "until": p.until or None, "agent": p.agent or None}
        daily = self.archive.usage("daily", **window)
        by_model, by_project = self.archive.usage("model", **window), self.archive.usage("project", **window)
        by_session = self.archive.usage("session", **window)
        context: dict[str, Any] = dict(usage_cells)
        return self.render(
            request,
            "usage.html",
            p=p,
            daily=daily,
            by_model=by_model,
            by_project=by_project,
            by_session=by_session,
            tokens_plot=day_series(daily.lines, "tokens"),
            cost_plot=day_series(daily.lines, "cost"),
            cache_plot=day_series(daily.lines, "cache"),
            model_plot=share_plot(by_model.lines),
            project_plot=share_plot(by_project.lines),
            **context,
        )

    async def ledger(self, request: Request) -> Response:
        """One session's context ledger: what pi-memory added to its requests and what it removed."""
        from ...archive.present import usage_cells
        from .usage_views import ledger_plot

        sid = self.archive.resolve_session(request.path_params["sid"])
        led = self.archive.usage_ledger(sid)
        context: dict[str, Any] = dict(usage_cells)
        return self.render(request, "ledger.html", led=led, t=led.totals(), plot=ledger_plot(led), **context)

    async def memory(self, request: Request) -> Response:
        ws = (request.query_params.get("ws") or "").strip()
        if not ws:
            return self.render(request, "memory.html", ws=None, chains=self.archive.memory_verify(all_workspaces=True))
        listing = self.archive.memory_list(ws, status="all")
        groups = memory_groups(listing.found)
        return self.render(request, "memory.html", ws=listing.workspace, listing=listing, groups=groups)

    async def memory_confirm_page(self, request: Request) -> Response:
        action, ws, ref = self.memory_target(request.path_params["action"], request.query_params)
        record = self.archive.memory_get(ws, ref)
        return self.render(request, "confirm.html", action=action, ws=ws, record=record)

    async def memory_action(self, request: Request) -> Response:
        form = await request.form()
        fields = {k: str(v) for k, v in form.items() if isinstance(v, str)}
        if not self.settings.write:
            return self.message(request, 403, "Read-only", "This viewer is read-only: start it with --write.")
        if not security.same(fields.get("csrf"), self.settings.csrf):
            return self.message(request, 403, "Refused", "Refused: the form's CSRF token is missing or wrong.")
        if fields.get("confirm") != "yes":
            return self.message(request, 400, "Not confirmed", "Nothing was changed: the action was not confirmed.")
        action, ws, ref = self.memory_target(request.path_params["action"], fields)
        if action == "forget":
            self.archive.memory_forget(ws, ref)
        else:
            self.archive.memory_confirm(ws, ref)
        return RedirectResponse(f"/memory?{urlencode({'ws': ws})}", status_code=303)

    @staticmethod
    def memory_target(action: str, values: Any) -> tuple[str, str, str]:
        if action not in MEMORY_ACTIONS:
            raise NotFound(f"no memory action {action!r}")
        ws, ref = (values.get("ws") or "").strip(), (values.get("ref") or "").strip()
        if not ws or not ref:
            raise BadInput("name the workspace (ws) and the memory (ref)")
        return action, ws, ref

    # --- login ----------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        target = safe_next(request.query_params.get("next"))
        if request.method == "GET":
            return self.render(request, "login.html", next=target, wrong=False)
        form = await request.form()
        given = form.get("token")
        if self.settings.token is None or not security.same(
            given if isinstance(given, str) else None, self.settings.token
        ):
            return self.render(request, "login.html", status=401, next=target, wrong=True)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(security.TOKEN_COOKIE, self.settings.token, httponly=True, samesite="strict")
        return response


def safe_next(value: str | None) -> str:
    """Where to go after the login: a path on this server only (never `//elsewhere`)."""
    if value and value.startswith("/") and not value.startswith("//"):
        return value
    return "/"


def memory_groups(found: list[Any]) -> list[tuple[str, list[Any]]]:
    """Pinned first, then active, provisional, resolved and superseded records."""
    records = [f.record for f in found]
    pinned = [r for r in records if r.pinned and r.status in ("active", "provisional")]
    groups = [("pinned", pinned)]
    for status in ("active", "provisional", "resolved", "superseded"):
        groups.append((status, [r for r in records if r.status == status and r not in pinned]))
    return groups


# --- errors and access ------------------------------------------------------------------


def error_handlers(viewer: Viewer) -> dict[Any, Callable[[Request, Exception], Awaitable[Response]]]:
    async def archive_error(request: Request, exc: Exception) -> Response:
        status = 404 if isinstance(exc, NotFound) else 400 if isinstance(exc, BadInput) else 500
        title = {404: "Not found", 400: "Bad request"}.get(status, "Archive error")
        return viewer.message(request, status, title, str(exc))

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        text = "There is no such page." if status == 404 else str(getattr(exc, "detail", "")) or "Request refused."
        return viewer.message(request, status, "Not found" if status == 404 else "Error", text)

    async def crash(request: Request, exc: Exception) -> Response:
        return viewer.message(request, 500, "Internal error", f"The page failed ({type(exc).__name__}).")

    return {ArchiveError: archive_error, HTTPException: http_error, Exception: crash}


class Guard(BaseHTTPMiddleware):
    """The Host check and the access token, before any page."""

    def __init__(self, app: Any, settings: Settings) -> None:
        super().__init__(app)
        self.settings = settings

    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        s = self.settings
        if not security.host_ok(request.headers.get("host"), s.allowed_hosts):
            return Response("unknown Host header\n", status_code=421, media_type="text/plain")
        path = request.url.path
        if s.token and not security.is_open_path(path):
            if not security.same(request.cookies.get(security.TOKEN_COOKIE), s.token):
                target = path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse(f"/login?{urlencode({'next': target})}", status_code=303)
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response


# Only our own script and style run: an archived `<script>` that got past escaping still would not.
CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"


def create_app(archive: Archive, settings: Settings | None = None, warm: bool = False) -> Starlette:
    """The viewer's app; `warm` computes the overview and loads what a search needs before the
    first visitor asks (`serve` does)."""
    settings = settings or Settings()
    viewer = Viewer(archive, settings)
    if warm:
        viewer.overview_figures(OVERVIEW_DAYS)
        viewer.timeline_figures("", "")
        archive.preload_search()
    routes = [
        Route("/", viewer.overview),
        Route("/search", viewer.search),
        Route("/session/{sid}", viewer.session),
        Route("/read/{address:path}", viewer.read),
        Route("/timeline", viewer.timeline),
        Route("/file", viewer.file),
        Route("/export/{target}", viewer.export),
        Route("/review", viewer.review),
        Route("/usage", viewer.usage),
        Route("/usage/ledger/{sid}", viewer.ledger),
        Route("/memory", viewer.memory),
        Route("/memory/{action}", viewer.memory_confirm_page, methods=["GET"]),
        Route("/memory/{action}", viewer.memory_action, methods=["POST"]),
        Route("/login", viewer.login, methods=["GET", "POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    middleware = [Middleware(Guard, settings=settings)]
    return Starlette(routes=routes, middleware=middleware, exception_handlers=error_handlers(viewer))
