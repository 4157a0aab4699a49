"""Register tiles sized for the vector width (polyc.tiling.microkernel.register_file):
AVX2's 16 ymm registers get tiles of at most 12 accumulators, AVX-512's keep theirs;
``vector_bits=`` sizes for a width other than the host's, traces record the width, and
the results match onnxruntime or numpy whichever tiles run (the code runs on this
host whatever the width assumed)."""

import json
import re

import numpy as np
import pytest
from onnx import helper

import polyc
from polyc import host
from polyc.errors import PolycError
from polyc.tiling.cache import Caches
from polyc.tiling.microkernel import YMM, ZMM, choose_blocking, register_file
from polyc.trace import Trace, trace_of

from onnx_helpers import ATOL, RTOL, make_model, random_inputs, run_onnxruntime, untiled_contraction

YMM_REGISTERS = 16  # AVX2: 16 ymm registers of 8 floats (4 doubles)
CACHES = Caches(32 << 10, 512 << 10, 32 << 20)


def matmul_relu(m, k, n, dtype="float32"):
    w = np.random.default_rng(0).standard_normal((k, n)).astype(dtype)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])]
    kind = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    return make_model(nodes, [("a", [m, k], kind)], [("y", [m, n], kind)],
                      initializers=[("w", w)])


def register_tiles(compiled) -> list[tuple[int, int]]:
    return [tuple(map(int, found)) for d in compiled.schedule.decisions
            for found in re.findall(r"register tile (\d+)x(\d+)", d)]


def test_avx2_tiles_leave_registers_for_a_broadcast_and_a_load():
    for mr, nr in YMM.tiles + YMM.symbolic_tiles:
        assert mr * nr // 8 <= YMM_REGISTERS - 2 and nr % 16 == 0
    for mr, nr in YMM.wide_tiles:  # doubles: 4 a register
        assert mr * -(-nr // 4) <= YMM_REGISTERS - 2
    assert YMM.accumulators * 2 <= YMM_REGISTERS - 2  # polyc's vectors of 16: 2 ymm
    assert register_file(512) is ZMM and register_file(256) is YMM


@pytest.mark.parametrize(("shape", "tile"), [((1024, 1024, 1024), (6, 16)),
                                             ((1000, 1100, 1200), (5, 16)),
                                             ((96, 64, 128), (6, 16))])
def test_a_products_tile_on_avx2(shape, tile):
    c = untiled_contraction(matmul_relu(*shape))
    block = choose_blocking(c, CACHES, registers=YMM)
    assert (block.mr, block.nr) == tile
    assert choose_blocking(c, CACHES, registers=ZMM).nr >= 32  # AVX-512's: wider


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_products_sized_for_either_width_match_onnxruntime(dtype):
    model = matmul_relu(50, 70, 90, dtype)
    inputs = {"a": np.random.default_rng(3).standard_normal((50, 70)).astype(dtype)}
    expected = run_onnxruntime(model, inputs)["y"]
    for bits, most in ((256, YMM_REGISTERS - 2), (512, 24)):
        compiled = polyc.compile(model, vector_bits=bits, threads=1)
        ((mr, nr),) = set(register_tiles(compiled))
        per_register = (8 if bits == 256 else 16) // (2 if dtype == "float64" else 1)
        assert mr * -(-nr // per_register) <= most, (bits, mr, nr)
        np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=RTOL, atol=ATOL)


def test_a_direct_conv_on_avx2_takes_one_vector_of_channels():
    w = np.random.default_rng(1).standard_normal((64, 16, 3, 3)).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])
    model = make_model([conv], [("x", [1, 16, 23, 24])], ["y"], initializers=[("w", w)])
    inputs = random_inputs(model, seed=4)
    expected = run_onnxruntime(model, inputs)["y"]
    ymm = polyc.compile(model, vector_bits=256, winograd="off", threads=1)
    zmm = polyc.compile(model, vector_bits=512, winograd="off", threads=1)
    assert {nr for _, nr in register_tiles(ymm)} == {16}
    assert {nr for _, nr in register_tiles(zmm)} == {32}
    for compiled in (ymm, zmm):  # sums of 144 products in another order than onnxruntime's
        np.testing.assert_allclose(compiled.run(inputs)["y"], expected, rtol=1e-4, atol=1e-4)


def test_the_width_assumed_is_an_option_a_trace_records(monkeypatch):
    model = matmul_relu(40, 30, 64)
    compiled = polyc.compile(model, threads=1)
    trace = trace_of(compiled.compilation)
    assert trace.compile["vector_bits"] == host.host_vector_bits()
    other = 512 if host.host_vector_bits() < 512 else 256  # a host of the other width
    monkeypatch.setattr(host, "host_vector_bits", lambda: other)
    assert register_tiles(polyc.compile(model, threads=1)) != register_tiles(compiled)
    again = Trace.from_json(json.loads(json.dumps(trace.to_json()))).compiled(
        model.SerializeToString())
    assert register_tiles(again) == register_tiles(compiled)
    assert again.compilation.llvm_ir == compiled.compilation.llvm_ir


@pytest.mark.parametrize("bits", [0, 384, 1024, True, "avx2"])
def test_a_width_that_is_none_is_refused(bits):
    with pytest.raises(PolycError, match="vector_bits must be one of 128, 256, 512"):
        polyc.compile(matmul_relu(8, 8, 16), vector_bits=bits)


def test_the_width_assumed_ends_with_the_compile():
    before = host.vector_bits()
    polyc.compile(matmul_relu(8, 8, 16), vector_bits=128 if before > 128 else 512)
    assert host.vector_bits() == before
