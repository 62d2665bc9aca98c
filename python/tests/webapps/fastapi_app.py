"""A FastAPI service measured by pipetel.asgi.Middleware, served by a real uvicorn in the web
tests (python/tests/test_web_middleware.py). pipetel starts here, in the serving process, from
the environment the test gives (OTLP to a real collector, the pull endpoint on a free port)."""

import logging

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

import pipetel
import pipetel.asgi
from pipetel import telefuser

guard = pipetel.init("web-fastapi")
log = logging.getLogger("web.fastapi")
log.setLevel(logging.INFO)
log.propagate = False
log.addHandler(pipetel.LoggingHandler())

api = FastAPI()
items_read = telefuser.get_metrics_registry().counter("items_read", "Items read")


@api.get("/items/{item_id}")
async def read_item(item_id: int):
    log.info("reading item %d", item_id)
    items_read.inc()
    with pipetel.span("lookup", item=item_id) as s:
        return {"item": item_id, "trace_id": s.trace_id, "span_id": s.span_id}


@api.post("/items")
async def create_item(request: Request):
    body = await request.body()
    return {"created": len(body)}


@api.get("/boom")
async def boom():
    raise RuntimeError("boom")


@api.get("/metrics")
async def metrics(om: bool = False):
    # The application's own /metrics route: the whole page the pull endpoint serves.
    return PlainTextResponse(pipetel.prometheus_text(openmetrics=om))


@api.get("/tf-metrics")
async def tf_metrics():
    # TeleFuser's route: the global registry's exposition (its own metrics and the stage metrics).
    return Response(telefuser.get_metrics_registry().get_prometheus_format(), media_type="text/plain")


app = pipetel.asgi.Middleware(api)
