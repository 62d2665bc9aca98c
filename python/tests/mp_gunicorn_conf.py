"""gunicorn configuration of the multi-worker server tests: each worker starts pipetel through
:mod:`pipetel.multiprocess` once it is initialised (sync and uvicorn workers alike)."""


def post_worker_init(worker):
    import mp_app

    mp_app.start()
