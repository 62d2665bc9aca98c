import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
VECTORS = REPO / "crates" / "pipetel-recorders" / "tests" / "vectors"


@pytest.fixture
def vectors() -> pathlib.Path:
    return VECTORS
