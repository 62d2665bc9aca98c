"""A WSGI app (``mp_app:wsgi``) and an ASGI app (``mp_app:asgi``) for the multi-worker server
tests (python/tests/test_multiprocess.py). Every request counts once in ``app_requests_total``
(by route), observes 0.25 s in ``app_latency_seconds`` and answers with the worker's pid;
``app_workers_up`` is 1 in every live worker.

Run under ``uvicorn --workers N`` the module starts pipetel itself (``MP_APP_INIT=1``); under
gunicorn the config's ``post_worker_init`` hook does (python/tests/mp_gunicorn_conf.py).
"""

import os

import pipetel.multiprocess
from pipetel.telefuser import get_metrics_registry

_metrics = {}


def start() -> None:
    pipetel.multiprocess.init("mp-app", directory=os.environ["PIPETEL_MULTIPROCESS_DIR"], interval=0.2)
    registry = get_metrics_registry("app")
    _metrics["hello"] = registry.counter("requests", "Requests served", labels={"route": "/hello"})
    _metrics["other"] = registry.counter("requests", "Requests served", labels={"route": "/other"})
    _metrics["latency"] = registry.histogram("latency_seconds", "Request latency", buckets=[0.1, 0.5, 1.0])
    registry.gauge("workers_up", "Live workers").set(1)


if os.environ.get("MP_APP_INIT") == "1":
    start()


def _count(path: str) -> bytes:
    _metrics["other" if path == "/other" else "hello"].inc()
    _metrics["latency"].observe(0.25)
    return str(os.getpid()).encode()


def wsgi(environ, start_response):
    body = _count(environ.get("PATH_INFO", "/"))
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


async def asgi(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = _count(scope["path"])
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
