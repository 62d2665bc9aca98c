"""The installed package: typed, stubs in step with the native module."""

import ast
import pathlib

import pytest

import pipetel
from pipetel import _pipetel


def test_installed_package_ships_py_typed_and_the_native_stub():
    root = pathlib.Path(pipetel.__file__).parent
    assert (root / "py.typed").is_file()
    assert (root / "_pipetel.pyi").is_file()
    # The installed package, not the source tree.
    assert "site-packages" in str(root)


def test_stubs_name_every_public_native_name_and_nothing_else():
    stub = ast.parse((pathlib.Path(pipetel.__file__).parent / "_pipetel.pyi").read_text())
    stubbed = {
        n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and not n.name.startswith("_")
    } | {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign) and not n.target.id.startswith("_")}
    native = {n for n in dir(_pipetel) if not n.startswith("_")} | {"__version__"}
    assert stubbed | {"__version__"} == native
    # Every native name is re-exported, as itself, by the package or one of its modules.
    exported = {}
    for module in [pipetel] + [getattr(pipetel, m) for m in MODULES]:
        for n in module.__all__:
            exported.setdefault(n, []).append(getattr(module, n))
    for n in native - {"__version__"}:
        assert any(obj is getattr(_pipetel, n) for obj in exported.get(n, [])), n
    assert all(hasattr(pipetel, n) for n in pipetel.__all__)


#: The public modules: the concepts, then the source systems' facades.
MODULES = ["registry", "recorders", "pipeline", "tracing", "zephyr", "telefuser", "mstar"]


#: Modules of integrations, typed the same way.
INTEGRATIONS = ["asgi", "wsgi", "multiprocess", "remote", "rows"]


def unannotated(qualname, fn, method):
    """The parameters and return of ``fn`` without an annotation, each named; every annotation
    must also resolve (``typing.get_type_hints``)."""
    import inspect
    import typing

    typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters.values())
    if method and params and params[0].name in ("self", "cls"):
        params = params[1:]
    missing = [f"{qualname}({p.name})" for p in params if p.annotation is inspect.Parameter.empty]
    if inspect.signature(fn).return_annotation is inspect.Signature.empty:
        missing.append(f"{qualname} -> ?")
    return missing


def test_the_only_stub_is_the_native_modules():
    """The Python modules carry their types inline (``py.typed``); a stub beside one of them would
    hide its annotations from type checkers and repeat its signatures."""
    root = pathlib.Path(pipetel.__file__).parent
    assert sorted(p.name for p in root.glob("*.pyi")) == ["_pipetel.pyi"]


@pytest.mark.parametrize("name", [""] + MODULES + INTEGRATIONS)
def test_every_public_module_is_typed_inline(name):
    """Every public function and method a module defines annotates each parameter and its
    return; the names it re-exports from the native module are typed by ``_pipetel.pyi``."""
    import importlib
    import inspect

    module = importlib.import_module(f"pipetel.{name}" if name else "pipetel")
    missing = []
    for n in module.__all__:
        obj = getattr(module, n)
        if obj is getattr(_pipetel, getattr(obj, "__name__", n), None):
            continue
        if inspect.isfunction(obj):
            missing += unannotated(f"{module.__name__}.{n}", obj, method=False)
        elif inspect.isclass(obj):
            own = [c for c in obj.__mro__ if c.__module__.startswith("pipetel.") and c.__module__ != "pipetel._pipetel"]
            for cls in own:
                for k, v in vars(cls).items():
                    if k.startswith("_") and k != "__init__":
                        continue
                    fn = v.__func__ if isinstance(v, (classmethod, staticmethod)) else v
                    fn = v.fget if isinstance(v, property) else fn
                    if inspect.isfunction(fn):
                        missing += unannotated(f"{cls.__qualname__}.{k}", fn, method=not isinstance(v, staticmethod))
    assert not missing, missing
    assert all(hasattr(module, n) for n in module.__all__)


#: A user's program: what it assigns must type-check against the package's annotations.
USER_PROGRAM = """
import pipetel
from pipetel.registry import CounterSeries, HistogramSeries

latency: HistogramSeries = pipetel.Histogram("latency_seconds", "d", ["route"]).labels("/a")
latency.observe(0.2)
hits: CounterSeries = pipetel.Counter("hits", "d", ["route"]).labels(route="/a")
hits.inc()


@pipetel.traced
def load(n: int) -> int:
    return n


rows: int = load(3)
"""


def mypy(cwd, *args):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cwd / ".cache"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_package_and_a_users_program_type_check(tmp_path):
    """mypy finds no error in the installed package (its inline annotations agree with its code
    and with the native stub), accepts a user's program, and refuses one that assigns a
    histogram's series to a counter's: the metric classes keep their series types."""
    package = mypy(tmp_path, "-p", "pipetel")
    assert package.returncode == 0, package.stdout + package.stderr
    good = tmp_path / "good.py"
    good.write_text(USER_PROGRAM)
    checked = mypy(tmp_path, str(good))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    bad = tmp_path / "bad.py"
    bad.write_text(USER_PROGRAM.replace("latency: HistogramSeries", "latency: CounterSeries"))
    refused = mypy(tmp_path, str(bad))
    assert refused.returncode == 1 and "Incompatible types in assignment" in refused.stdout, refused.stdout


@pytest.mark.parametrize("name", [""] + MODULES)
def test_help_reads_well_on_every_module_and_object(name):
    """Each module's docstring is a map of what it holds (it names each public class), and
    every public class and function has a docstring, so ``help()`` says what each is."""
    import inspect
    import pydoc

    module = getattr(pipetel, name) if name else pipetel
    assert module.__doc__ and len(module.__doc__.splitlines()) > 5
    for n in module.__all__:
        obj = getattr(module, n)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            assert (obj.__doc__ or "").strip(), f"{module.__name__}.{n} has no docstring"
    text = pydoc.render_doc(module, renderer=pydoc.plaintext)
    assert module.__doc__.splitlines()[0] in text


def test_version_is_the_crate_version():
    assert pipetel.__version__.count(".") == 2


def test_docs_python_blocks_run():
    """Every ```python block of README.md, python/README.md (the PyPI page) and the book
    (docs/src/*.md) runs (a block that cannot run alone is fenced ```py instead)."""
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    pages = [root / "README.md", root / "python" / "README.md"] + sorted((root / "docs" / "src").glob("*.md"))
    blocks = []
    for page in pages:
        text = page.read_text()
        blocks += [(page.name, b.split("```", 1)[0]) for b in text.split("```python\n")[1:]]
    assert blocks, "the docs have no ```python block"
    for page, block in blocks:
        # A block that hangs fails here instead of holding the suite.
        run = subprocess.run([sys.executable, "-c", block], capture_output=True, timeout=120)
        assert run.returncode == 0, f"{page}: {run.stderr.decode()}"
        # The quick start writes one frame: a 4-byte length, then that many bytes.
        if b"encode_frame" in block.encode():
            assert int.from_bytes(run.stdout[:4], "little") == len(run.stdout) - 4
