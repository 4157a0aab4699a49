"""The ONNX node conformance tests shipped in the onnx package, run through polyc.

An explicit allow list: every node test whose model uses only ops polyc lowers, minus
the exclusions below, each with its reason (excluded tests are not run at all).
Integer (int64) graph inputs such as Reshape's ``shape`` or the Reduce ``axes`` are
bound as constants by the backend when the test feeds them (see ``polyc.backend``).
The other test kinds in the onnx package (pytorch-converted, pytorch-operator, simple)
use opsets 6 and 9, below polyc's 11.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.backend.test.loader import load_model_tests

from polyc.backend import PolycBackend

from onnx_helpers import make_model

# The backend under test: the whole compiler (native code run in process).
BACKEND = PolycBackend

SUPPORTED_OPS = frozenset({
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Exp",
    "Log", "Sqrt", "Neg", "Abs", "Identity", "Reshape", "Flatten", "Transpose",
    "Softmax", "ReduceSum", "ReduceMean", "ReduceMax", "Constant",
})

ALLOWED = [
    "test_abs",
    "test_add", "test_add_bcast",
    "test_clip_default_inbounds_expanded",
    "test_constant",
    "test_div", "test_div_bcast", "test_div_example",
    "test_exp", "test_exp_example",
    "test_flatten_axis0", "test_flatten_axis1", "test_flatten_axis2", "test_flatten_axis3",
    "test_flatten_default_axis", "test_flatten_negative_axis1", "test_flatten_negative_axis2",
    "test_flatten_negative_axis3", "test_flatten_negative_axis4",
    "test_gemm_all_attributes", "test_gemm_alpha", "test_gemm_beta",
    "test_gemm_default_matrix_bias", "test_gemm_default_no_bias",
    "test_gemm_default_scalar_bias", "test_gemm_default_single_elem_vector_bias",
    "test_gemm_default_vector_bias", "test_gemm_default_zero_bias",
    "test_gemm_transposeA", "test_gemm_transposeB",
    "test_identity",
    "test_log", "test_log_example",
    *[f"test_logsoftmax_{case}_expanded{ver}"
      for case in ("axis_0", "axis_1", "axis_2", "default_axis", "example_1",
                   "large_number", "negative_axis")
      for ver in ("", "_ver18")],
    "test_matmul_1d_1d", "test_matmul_1d_3d", "test_matmul_2d", "test_matmul_3d",
    "test_matmul_4d", "test_matmul_4d_1d", "test_matmul_bcast",
    "test_mul", "test_mul_bcast", "test_mul_example",
    "test_neg", "test_neg_example",
    *[f"test_reduce_l1_{case}_expanded"
      for case in ("default_axes_keepdims_example", "default_axes_keepdims_random",
                   "do_not_keepdims_example", "do_not_keepdims_random", "empty_set",
                   "keep_dims_example", "keep_dims_random",
                   "negative_axes_keep_dims_example", "negative_axes_keep_dims_random")],
    *[f"test_reduce_log_sum_{case}_expanded"
      for case in ("asc_axes", "default", "desc_axes", "empty_set", "negative_axes")],
    "test_reduce_max_default_axes_keepdim_example", "test_reduce_max_default_axes_keepdims_random",
    "test_reduce_max_do_not_keepdims_example", "test_reduce_max_do_not_keepdims_random",
    "test_reduce_max_empty_set",
    "test_reduce_max_keepdims_example", "test_reduce_max_keepdims_random",
    "test_reduce_max_negative_axes_keepdims_example",
    "test_reduce_max_negative_axes_keepdims_random",
    *[f"test_reduce_mean_{case}"
      for case in ("default_axes_keepdims_example", "default_axes_keepdims_random",
                   "do_not_keepdims_example", "do_not_keepdims_random",
                   "keepdims_example", "keepdims_random",
                   "negative_axes_keepdims_example", "negative_axes_keepdims_random")],
    *[f"test_reduce_sum_{case}"
      for case in ("default_axes_keepdims_example", "default_axes_keepdims_random",
                   "do_not_keepdims_example", "do_not_keepdims_random",
                   "empty_axes_input_noop", "empty_axes_input_noop_example",
                   "empty_set", "empty_set_non_reduced_axis_zero",
                   "keepdims_example", "keepdims_random",
                   "negative_axes_keepdims_example", "negative_axes_keepdims_random")],
    *[f"test_reduce_sum_square_{case}_expanded"
      for case in ("default_axes_keepdims_example", "default_axes_keepdims_random",
                   "do_not_keepdims_example", "do_not_keepdims_random", "empty_set",
                   "keepdims_example", "keepdims_random",
                   "negative_axes_keepdims_example", "negative_axes_keepdims_random")],
    "test_relu",
    *[f"test_reshape_{case}"
      for case in ("allowzero_reordered", "extended_dims", "negative_dim",
                   "negative_extended_dims", "one_dim", "reduced_dims",
                   "reordered_all_dims", "reordered_last_dims", "zero_and_negative_dim",
                   "zero_dim")],
    "test_sigmoid", "test_sigmoid_example",
    *[f"test_softmax_{case}{variant}"
      for case in ("axis_0", "axis_1", "axis_2", "default_axis", "example",
                   "large_number", "negative_axis")
      for variant in ("", "_expanded", "_expanded_ver18")],
    "test_sqrt", "test_sqrt_example",
    "test_sub", "test_sub_bcast", "test_sub_example",
    "test_tanh", "test_tanh_example",
    *[f"test_transpose_all_permutations_{k}" for k in range(6)],
    "test_transpose_default",
]

_INTEGER_DATA = "integer data tensors: polyc compiles float32 only"
EXCLUDED = {
    **{f"test_{op}_{dtype}": _INTEGER_DATA
       for op in ("add", "sub", "mul", "div")
       for dtype in ("int8", "int16", "uint8", "uint16", "uint32", "uint64")},
    "test_div_int32_trunc": _INTEGER_DATA,
    "test_clip_default_int8_inbounds_expanded": _INTEGER_DATA,
    "test_reduce_max_bool_inputs": "bool data tensors: polyc compiles float32 only",
    "test_reduce_max_empty_set_bool": "bool data tensors: polyc compiles float32 only",
    "test_identity_opt": "optional type: polyc compiles tensors only",
    "test_identity_sequence": "sequence type: polyc compiles tensors only",
}


NODE_TESTS = {case.name: case for case in load_model_tests(kind="node")}


@pytest.mark.parametrize("name", ALLOWED)
def test_onnx_node_conformance(name):
    """The shipped inputs and expected outputs, at the suite's own tolerances (the
    onnx runner's: rtol 1e-3, atol 1e-7 unless the test case says otherwise)."""
    case = NODE_TESTS[name]
    rep = BACKEND.prepare(case.model)
    assert case.data_sets, f"{name} ships no test data"
    for inputs, expected in case.data_sets:
        outputs = rep.run(inputs)
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol)


def test_allow_list_covers_every_node_test_of_supported_ops():
    """Every node test using only supported ops is allowed or excluded with a reason."""
    covered = {case.name for case in NODE_TESTS.values()
               if {n.op_type for n in case.model.graph.node} <= SUPPORTED_OPS}
    listed = set(ALLOWED) | set(EXCLUDED)
    assert covered - listed == set()
    assert listed - covered == set()
    assert not set(ALLOWED) & set(EXCLUDED)


def test_backend_takes_positional_inputs_and_binds_int64_inputs():

    model = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"])],
                       [("x", (2, 3)), ("shape", (2,), TensorProto.INT64)], [("y", (3, 2))])
    rep = BACKEND.prepare(model)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = rep.run([x, np.array([3, 2])])
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    (y,) = rep.run({"x": x, "shape": np.array([-1, 2])})
    np.testing.assert_array_equal(y, x.reshape(3, 2))
    assert BACKEND.supports_device("CPU") and not BACKEND.supports_device("CUDA")
