"""The installed package: typed, stubs in step with the native module."""

import ast
import pathlib

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
    # Every native name is re-exported; the rest of __all__ is the package's own Python layer.
    assert native <= set(pipetel.__all__)
    assert all(hasattr(pipetel, n) for n in pipetel.__all__)


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
        run = subprocess.run([sys.executable, "-c", block], capture_output=True)
        assert run.returncode == 0, f"{page}: {run.stderr.decode()}"
        # The quick start writes one frame: a 4-byte length, then that many bytes.
        if b"encode_frame" in block.encode():
            assert int.from_bytes(run.stdout[:4], "little") == len(run.stdout) - 4
