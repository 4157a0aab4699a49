"""The runtime with symbolic dims: one compiled function for every size.

A hand-written module follows the ABI with one parameter ``n`` (see
``polyc.runtime.abi``)::

    polyc_main(x[n], b[n, 2], y[n, 2], scratch[polyc_scratch_bytes(n)], int64 n)
        scratch[i] = 2 * x[i]
        y[i, k] = scratch[i] + b[i, k]

The runtime reads ``n`` from the inputs' shapes, checks that they agree, sizes ``y``
and the scratch buffer, and passes ``n``; JIT and AOT alike.
"""

import numpy as np
import pytest
from llvmlite import ir

import polyc
from polyc.errors import ArtifactError, CodegenError, InputError
from polyc.runtime.aot import write_artifact
from polyc.runtime.jit import JitModule

MANIFEST = {
    "format": "polyc-1", "entry": "polyc_main", "params": ["n"],
    "inputs": [{"name": "x", "shape": ["n"], "dtype": "float32"},
               {"name": "b", "shape": ["n", 2], "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": ["n", 2], "dtype": "float32"}],
    "scratch_bytes": "polyc_scratch_bytes",
    "model_hash": "test-params", "options": {}, "polyc_version": polyc.__version__,
}


def parametric_ir() -> str:
    f32, i64, ptr = ir.FloatType(), ir.IntType(64), ir.PointerType()
    module = ir.Module(name="params")
    size = ir.Function(module, ir.FunctionType(i64, [i64]), "polyc_scratch_bytes")
    b = ir.IRBuilder(size.append_basic_block("entry"))
    b.ret(b.mul(size.args[0], ir.Constant(i64, 4)))

    main = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * 4 + [i64]), "polyc_main")
    x, bias, y, scratch, n = main.args
    entry, loop, done = (main.append_basic_block(name) for name in ("entry", "loop", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
    b.position_at_end(loop)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    at = lambda base, k: b.gep(base, [k], inbounds=True, source_etype=f32)  # noqa: E731
    twice = b.fmul(b.load(at(x, i), typ=f32), ir.Constant(f32, 2.0))
    b.store(twice, at(scratch, i))
    for k in range(2):
        flat = b.add(b.mul(i, ir.Constant(i64, 2)), ir.Constant(i64, k))
        value = b.fadd(b.load(at(scratch, i), typ=f32), b.load(at(bias, flat), typ=f32))
        b.store(value, at(y, flat))
    following = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(following, loop)
    b.cbranch(b.icmp_signed("<", following, n), loop, done)
    b.position_at_end(done)
    b.ret_void()
    return str(module)


def inputs(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(n, dtype=np.float32),
            "b": rng.standard_normal((n, 2), dtype=np.float32)}


@pytest.fixture(scope="module", params=["jit", "aot"])
def model(request, tmp_path_factory):
    if request.param == "jit":
        return JitModule(parametric_ir(), MANIFEST)
    path = tmp_path_factory.mktemp("params") / "params.so"
    return polyc.load(write_artifact(parametric_ir(), MANIFEST, path))


def test_one_function_runs_at_every_size(model):
    for n in (1, 3, 17, 1000, 2):  # the scratch buffer grows, then is reused
        given = inputs(n, seed=n)
        y = model.run(given)["y"]
        assert y.shape == (n, 2)
        np.testing.assert_array_equal(y, 2 * given["x"][:, None] + given["b"])


def test_inputs_that_disagree_on_a_parameter_are_refused(model):
    given = dict(inputs(3), b=np.zeros((4, 2), np.float32))
    with pytest.raises(InputError, match=r"input 'b' dim 0 gives n = 4, but input 'x' dim 0 "
                                         r"gave n = 3: inputs must agree on n"):
        model.run(given)


def test_a_fixed_dim_is_still_checked(model):
    with pytest.raises(InputError, match=r"input 'b' has shape \(3, 5\), expected \(3, 2\)"):
        model.run(dict(inputs(3), b=np.zeros((3, 5), np.float32)))


def test_a_parameter_must_be_positive(model):
    with pytest.raises(InputError, match="gives n = 0; n must be at least 1"):
        model.run(inputs(0))


def test_specs_show_the_parameters(model):
    assert str(model.inputs[1]) == "b: float32[n, 2]"
    assert model.params == ("n",)


@pytest.mark.parametrize("change,message", [
    ({"params": ["n", "m"]}, "parameter m is in no input shape"),
    ({"params": ["n", "n"]}, "bad params"),
    ({"params": []}, "bad inputs"),  # 'n' is then no int
])
def test_bad_parametric_manifests(change, message):
    with pytest.raises(CodegenError, match=message):
        JitModule(parametric_ir(), dict(MANIFEST, **change))


def test_a_missing_scratch_size_function(tmp_path):
    manifest = dict(MANIFEST, scratch_bytes="no_such_function")
    with pytest.raises(CodegenError, match="scratch size function no_such_function"):
        JitModule(parametric_ir(), manifest)
    path = write_artifact(parametric_ir(), manifest, tmp_path / "bad.so")
    with pytest.raises(ArtifactError, match="scratch size function no_such_function"):
        polyc.load(path)
