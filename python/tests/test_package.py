"""The installed package: typed, stubs in step with the native module."""

import ast
import pathlib

import pytest

import pipetel
from pipetel import _pipetel


def test_installed_package_ships_py_typed_and_stubs():
    root = pathlib.Path(pipetel.__file__).parent
    assert (root / "py.typed").is_file()
    assert (root / "_pipetel.pyi").is_file()
    # The installed package, not the source tree.
    assert "site-packages" in str(root)


def test_stubs_name_every_public_native_name_and_nothing_else():
    stub = ast.parse((pathlib.Path(pipetel.__file__).parent / "_pipetel.pyi").read_text())
    stubbed = {
        n.name for n in stub.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and not n.name.startswith("_")
    } | {n.target.id for n in stub.body if isinstance(n, ast.AnnAssign)}
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


def stub_names(path):
    """The names a stub defines or re-exports (``from x import a as a``), private ones aside."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom) and node.level == 1 and [a.name for a in node.names] == ["*"]:
            # `from .recorders import *`: that stub's names.
            names |= stub_names(path.parent / f"{node.module}.pyi")
        elif isinstance(node, (ast.ImportFrom, ast.Import)):
            names |= {a.asname or a.name for a in node.names if a.asname}
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("name", [""] + MODULES)
def test_every_public_module_has_a_stub_naming_its_all(name):
    module = getattr(pipetel, name) if name else pipetel
    root = pathlib.Path(pipetel.__file__).parent
    stub = root / (f"{name}.pyi" if name else "__init__.pyi")
    assert stub.is_file(), stub
    public = set(module.__all__) - {"__version__"}
    assert public <= stub_names(stub), public - stub_names(stub)
    assert all(hasattr(module, n) for n in module.__all__)


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
