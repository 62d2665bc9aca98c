"""HTTP server spans and metrics for WSGI applications (Flask, Django, ...).

::

    app = Flask(__name__)
    ...
    app.wsgi_app = pipetel.wsgi.Middleware(app)     # or serve pipetel.wsgi.Middleware(app)

What is measured is what :mod:`pipetel.asgi` measures (the server span continuing the caller's
W3C trace, ``http.server.request.duration``, ``http.server.active_requests`` and the body
sizes, through the instruments of Rust's ``pipetel::http`` layer). A request ends when the
server closes the response iterable, so a streamed body's time and bytes count.

``http.route`` is the route template the framework matched:

* Flask: given the Flask application itself, the middleware wraps its ``wsgi_app`` and adds a
  ``before_request`` hook (run first) that leaves ``request.url_rule.rule`` in the environ;
* any framework: whatever sets ``environ["pipetel.route"]`` while handling the request, such as
  :class:`DjangoRoute` for Django (add ``"pipetel.wsgi.DjangoRoute"`` to ``MIDDLEWARE``).

A request no route matched has no ``http.route``. Call :func:`pipetel.init` before serving, in
each worker process (gunicorn: in the application module, or in a ``post_fork`` hook with
``--preload``).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

from ._pipetel import _HttpServer

__all__ = ["DjangoRoute", "Middleware", "ROUTE_KEY"]

#: The environ key a framework hook sets to the matched route template.
ROUTE_KEY = "pipetel.route"

_MAX_SIZE = (1 << 64) - 1

StartResponse = Callable[..., Any]
WSGIApp = Callable[[Dict[str, Any], StartResponse], Iterable[bytes]]


def _size(value: Optional[str]) -> Optional[int]:
    if not value:
        return None
    try:
        size = int(value)
    except ValueError:
        return None
    return size if 0 <= size <= _MAX_SIZE else None


def _flask_route_hook(app: Any) -> None:
    """Makes ``app`` (a Flask application) leave the matched rule in the environ, first of its
    ``before_request`` hooks so none can skip it."""
    from flask import request

    def leave_route() -> None:
        rule = request.url_rule
        if rule is not None:
            request.environ[ROUTE_KEY] = rule.rule

    app.before_request_funcs.setdefault(None, []).insert(0, leave_route)


class _Body:
    """The application's response iterable, counting the bytes sent; ends the request when the
    server closes it."""

    __slots__ = ("_inner", "_request", "_state", "_sent", "_environ")

    def __init__(self, inner: Iterable[bytes], request: Any, state: List[Any], environ: Dict[str, Any]) -> None:
        self._inner = inner
        self._request = request
        self._state = state
        self._sent = 0
        self._environ = environ

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                self._sent += len(chunk)
                yield chunk
        except BaseException as error:
            self._finish(error)
            raise

    def close(self) -> None:
        try:
            close = getattr(self._inner, "close", None)
            if close is not None:
                close()
        finally:
            self._finish(None)

    def _finish(self, error: Optional[BaseException]) -> None:
        self._request.finish(self._state[0], self._environ.get(ROUTE_KEY), self._sent, error)


class Middleware:
    """WSGI middleware measuring every request of ``app`` (see the module docs). ``app`` is a
    WSGI application, or a Flask application (then its ``wsgi_app`` is wrapped and its matched
    rule becomes ``http.route``)."""

    def __init__(self, app: Any) -> None:
        if hasattr(app, "url_map") and hasattr(app, "before_request_funcs") and hasattr(app, "wsgi_app"):
            _flask_route_hook(app)
            self.app: WSGIApp = app.wsgi_app
        else:
            self.app = app
        self._server: Optional[_HttpServer] = None

    def __call__(self, environ: Dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        server = self._server
        if server is None:
            server = self._server = _HttpServer()
        protocol = environ.get("SERVER_PROTOCOL", "HTTP/1.1")
        request = server.start(
            environ.get("REQUEST_METHOD", "GET"),
            environ.get("PATH_INFO", "") or "/",
            environ.get("wsgi.url_scheme", "http"),
            protocol[5:] if protocol.startswith("HTTP/") else protocol,
            environ.get("HTTP_TRACEPARENT"),
            environ.get("HTTP_TRACESTATE"),
            environ.get("HTTP_USER_AGENT"),
            _size(environ.get("CONTENT_LENGTH")),
        )
        state: List[Any] = [None]

        def start_measured(status: str, headers: Any, exc_info: Any = None) -> Any:
            try:
                state[0] = int(status[:3])
            except ValueError:
                state[0] = None
            if exc_info is not None:
                return start_response(status, headers, exc_info)
            return start_response(status, headers)

        try:
            with request.span:
                body = self.app(environ, start_measured)
        except BaseException as error:
            request.finish(state[0], environ.get(ROUTE_KEY), 0, error)
            raise
        return _Body(body, request, state, environ)


class DjangoRoute:
    """Django middleware leaving the matched URL pattern (``request.resolver_match.route``, with
    a leading ``/``) in the environ for :class:`Middleware`: add ``"pipetel.wsgi.DjangoRoute"``
    to ``MIDDLEWARE`` and serve the WSGI application wrapped in :class:`Middleware`."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        return self.get_response(request)

    def process_view(self, request: Any, view_func: Any, view_args: Any, view_kwargs: Any) -> None:
        match = getattr(request, "resolver_match", None)
        route = getattr(match, "route", None)
        if route:
            request.META[ROUTE_KEY] = route if route.startswith("/") else "/" + route
