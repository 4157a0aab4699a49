"""A cut, extended or edited artifact is refused with an ArtifactError before ``dlopen``
(``polyc.runtime.seal``): never a signal, never garbage.

Loads run in subprocesses, so a SIGBUS in ``dlopen`` (what a cut artifact did) would
fail the test instead of killing the test runner.
"""

import subprocess
import sys

import numpy as np
import pytest
from test_cli import assert_one_line_error, polyc

from polyc.runtime.aot import write_artifact

from test_runtime import MANIFEST, expected, random_inputs, scale_exp_ir

LOAD = """
import sys
import polyc
from polyc.errors import ArtifactError
try:
    polyc.load(sys.argv[1])
except ArtifactError as error:
    print(error)
"""


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    return write_artifact(scale_exp_ir(), MANIFEST, tmp_path_factory.mktemp("seal") / "m.so")


def load_in_subprocess(path) -> str:
    done = subprocess.run([sys.executable, "-c", LOAD, str(path)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr}"
    return done.stdout.strip()


@pytest.mark.parametrize("keep", [2048, 0.5, 0.9, -1])
def test_a_cut_artifact_is_refused(artifact, tmp_path, keep):
    data = artifact.read_bytes()
    cut = tmp_path / "cut.so"
    cut.write_bytes(data[:keep if isinstance(keep, int) else int(len(data) * keep)])
    assert "has no polyc seal at its end: it is cut short" in load_in_subprocess(cut)
    assert_one_line_error(polyc("run", cut), r"cut\.so has no polyc seal at its end")


def test_an_extended_artifact_is_refused(artifact, tmp_path):
    longer = tmp_path / "longer.so"
    longer.write_bytes(artifact.read_bytes() + b"\0" * 100)
    assert "has no polyc seal at its end" in load_in_subprocess(longer)


def test_an_edited_manifest_is_refused(artifact, tmp_path):
    """The manifest is JSON inside the library: changing an input's shape in it must not
    load (it ran on the old shape's code and returned garbage)."""
    data = artifact.read_bytes()
    shape = data.index(b'"shape": [')
    edited = tmp_path / "edited.so"
    digit = shape + len(b'"shape": [')
    edited.write_bytes(data[:digit] + bytes([data[digit] ^ 1]) + data[digit + 1:])
    assert "do not match its seal (SHA-256)" in load_in_subprocess(edited)
    assert_one_line_error(polyc("run", edited), r"edited\.so: its contents do not match")


def test_a_sealed_artifact_loads_and_runs(artifact):
    import polyc as api

    inputs = random_inputs(5)
    for name, value in api.load(artifact).run(inputs).items():
        np.testing.assert_allclose(value, expected(inputs)[name], rtol=1e-6, atol=1e-6)
