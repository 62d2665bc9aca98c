"""A Flask application measured by pipetel.wsgi.Middleware, served by a real gunicorn in the web
tests (python/tests/test_web_middleware.py). pipetel starts here, in the worker that imports
the module, from the environment the test gives (OTLP to a real collector)."""

import logging

from flask import Flask, request

import pipetel
import pipetel.wsgi

guard = pipetel.init("web-flask")
log = logging.getLogger("web.flask")
log.setLevel(logging.INFO)
log.propagate = False
log.addHandler(pipetel.LoggingHandler())

app = Flask(__name__)


@app.get("/items/<int:item_id>")
def read_item(item_id):
    log.info("reading item %d", item_id)
    with pipetel.span("lookup", item=item_id) as s:
        return {"item": item_id, "trace_id": s.trace_id, "span_id": s.span_id}


@app.post("/items")
def create_item():
    return {"created": len(request.get_data())}


@app.get("/stream")
def stream():
    return app.response_class((b"x" * 100 for _ in range(5)), mimetype="application/octet-stream")


@app.get("/boom")
def boom():
    raise RuntimeError("boom")


app.wsgi_app = pipetel.wsgi.Middleware(app)
