"""HTTP server spans and metrics for ASGI applications (FastAPI, Starlette, ...).

::

    app = FastAPI()
    ...
    app = pipetel.asgi.Middleware(app)        # or: app.add_middleware(pipetel.asgi.Middleware)

Per HTTP request, as Rust's ``pipetel::http`` layer does, through its own instruments (same
names, units, buckets and scope):

* a server span (kind ``SERVER``) named ``"{method} {route}"``, continuing the caller's trace
  from the W3C ``traceparent``/``tracestate`` headers, with ``http.request.method``,
  ``url.scheme``, ``url.path``, ``user_agent.original``, ``http.route`` and
  ``http.response.status_code``; status error for a 5xx response or an exception. It is the
  current span while the application runs, so :func:`pipetel.span` and
  :class:`pipetel.LoggingHandler` records inside the handler carry its trace;
* ``http.server.request.duration`` (seconds; the conventions' buckets, 5 ms to 10 s),
  ``http.server.request.body.size`` (the request's ``Content-Length``) and
  ``http.server.response.body.size`` (the body bytes sent), by ``http.request.method``,
  ``http.route``, ``http.response.status_code``, ``url.scheme``, ``network.protocol.name`` and
  ``network.protocol.version``; ``http.server.active_requests`` by method and scheme.

``http.route`` is the route template the framework matched (``/items/{item_id}``): Starlette and
FastAPI leave their route in the ASGI scope. A request no route matched (a 404 for a scanned
URL) has no ``http.route``, so random paths cannot grow the series. An unknown method is
recorded as ``_OTHER``.

Only ``http`` scopes are measured; ``websocket`` and ``lifespan`` pass through. The tracer and
instruments are taken at the first request, so call :func:`pipetel.init` before serving.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, MutableMapping, Optional

from ._pipetel import _HttpServer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["Middleware", "route_of"]

_MAX_SIZE = (1 << 64) - 1


def route_of(scope: Scope) -> Optional[str]:
    """The route template the framework matched for this scope, or ``None``: the ``path_format``
    or ``path`` of the Starlette/FastAPI route the router left in ``scope["route"]``, below the
    ``root_path`` of the mounts it went through."""
    route = scope.get("route")
    if route is None:
        return None
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    if not isinstance(template, str):
        return None
    # A route inside a Mount sees the mount's prefix in root_path (the app's own root_path is
    # the server's, given to every request, and is not part of the route).
    app_root = scope.get("app_root_path", "")
    mounted = scope.get("root_path", "")
    if mounted and mounted != app_root and mounted.startswith(app_root):
        return mounted[len(app_root) :] + template
    return template


def _size(value: bytes) -> Optional[int]:
    try:
        size = int(value)
    except ValueError:
        return None
    return size if 0 <= size <= _MAX_SIZE else None


class Middleware:
    """ASGI middleware measuring every HTTP request of ``app`` (see the module docs).

    ``route`` (optional) maps the ASGI scope, after the application ran, to the route template;
    the default, :func:`route_of`, reads Starlette's and FastAPI's route."""

    def __init__(self, app: ASGIApp, route: Callable[[Scope], Optional[str]] = route_of) -> None:
        self.app = app
        self._route = route
        self._server: Optional[_HttpServer] = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        server = self._server
        if server is None:
            server = self._server = _HttpServer()
        traceparent = tracestate = user_agent = None
        request_size = None
        for name, value in scope.get("headers", ()):
            if name == b"traceparent":
                traceparent = value.decode("latin-1")
            elif name == b"tracestate":
                tracestate = value.decode("latin-1")
            elif name == b"user-agent":
                user_agent = value.decode("latin-1")
            elif name == b"content-length":
                request_size = _size(value)
        request = server.start(
            scope["method"],
            scope["path"],
            scope.get("scheme", "http"),
            scope.get("http_version", "1.1"),
            traceparent,
            tracestate,
            user_agent,
            request_size,
        )
        status = None
        sent = 0

        async def send_measured(message: Message) -> None:
            nonlocal status, sent
            kind = message["type"]
            if kind == "http.response.body":
                sent += len(message.get("body", b""))
            elif kind == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            with request.span:
                await self.app(scope, receive, send_measured)
        except BaseException as error:
            request.finish(status, self._route(scope), sent, error)
            raise
        request.finish(status, self._route(scope), sent)
