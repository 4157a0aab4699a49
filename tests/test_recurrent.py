"""LSTM, GRU and RNN (polyc/frontend/ops/recurrent.py) against onnxruntime: every
direction, both layouts, biases, initial states, peepholes, sequence_lens (constant and
given at run time), clip, activation lists, GRU's linear_before_reset, float64; the
reference interpreter on the same Recurrence; and the errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import polyc
from polyc.errors import PolycError, UnsupportedOpError

from onnx_helpers import make_model, run_onnxruntime, run_polyc, run_reference

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DTYPES = {"float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE}


def recurrent_model(op, *, steps=5, batch=3, inputs=4, hidden=6, direction="forward",
                    layout=0, bias=True, initial=False, peepholes=False, lens=None,
                    lens_input=False, dtype="float32", seed=0, **attrs):
    """An ``op`` node with random weights (initializers), X (and sequence_lens when
    ``lens_input``) as graph inputs, and every output; the feeds."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[op]

    def weights(*shape, scale=0.5):
        return rng.uniform(-scale, scale, shape).astype(dtype)

    x_shape = (batch, steps, inputs) if layout else (steps, batch, inputs)
    state_shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    inits = [("W", weights(dirs, gates * hidden, inputs)),
             ("R", weights(dirs, gates * hidden, hidden))]
    names = ["X", "W", "R", "", "", "", "", ""]
    feeds = {"X": rng.uniform(-2, 2, x_shape).astype(dtype)}
    graph_inputs = [("X", x_shape, DTYPES[dtype])]
    if bias:
        inits.append(("B", weights(dirs, 2 * gates * hidden)))
        names[3] = "B"
    if lens is not None:
        names[4] = "lens"
        value = np.array(lens, np.int32)
        if lens_input:
            graph_inputs.append(("lens", (batch,), TensorProto.INT32))
            feeds["lens"] = value
        else:
            inits.append(("lens", value))
    if initial:
        inits.append(("h0", weights(*state_shape, scale=1.0)))
        names[5] = "h0"
        if op == "LSTM":
            inits.append(("c0", weights(*state_shape, scale=1.0)))
            names[6] = "c0"
    if peepholes:
        inits.append(("P", weights(dirs, 3 * hidden)))
        names[7] = "P"
    names = names[:max(k for k, n in enumerate(names) if n) + 1]
    outputs = ["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"]
    outputs = [(name, None, DTYPES[dtype]) for name in outputs]
    node = helper.make_node(op, names, [o[0] for o in outputs], hidden_size=hidden,
                            direction=direction, **({"layout": layout} if layout else {}),
                            **attrs)
    model = make_model([node], graph_inputs, outputs, initializers=inits,
                       opset=14 if layout else 13)
    return model, feeds


def check(model, feeds, tolerance=2e-5):
    want = run_onnxruntime(model, feeds)
    got = run_polyc(model, feeds)
    assert set(got) == set(want)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype, name
        np.testing.assert_allclose(got[name], expected, rtol=tolerance, atol=tolerance,
                                   err_msg=name)
    return got


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_every_direction_with_biases_and_initial_states(op, direction):
    check(*recurrent_model(op, direction=direction, initial=True, peepholes=op == "LSTM"))


@pytest.mark.parametrize("op", sorted(GATES))
def test_batch_major_layout(op):
    """layout=1 (X [batch, seq, input], states [batch, dirs, hidden]), which onnxruntime's
    CPU kernels refuse: against onnxruntime on the same op in layout 0, transposed."""
    model, feeds = recurrent_model(op, direction="bidirectional", initial=True, lens=[5, 2, 4])
    want = run_onnxruntime(model, feeds)
    got = run_polyc(batch_major(model),
                    {"X": np.ascontiguousarray(feeds["X"].transpose(1, 0, 2))})
    np.testing.assert_allclose(got["Y"], want["Y"].transpose(2, 0, 1, 3), rtol=2e-5,
                               atol=2e-5)
    for name in set(want) - {"Y"}:
        np.testing.assert_allclose(got[name], want[name].transpose(1, 0, 2), rtol=2e-5,
                                   atol=2e-5)


def batch_major(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` (one recurrent node, layout 0) in layout 1: X and the states batch first."""
    graph = model.graph
    node = graph.node[0]
    node.attribute.append(helper.make_attribute("layout", 1))
    inits = [onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).transpose(1, 0, 2),
                                          t.name) if t.name in ("h0", "c0") else t
             for t in graph.initializer]
    x = graph.input[0].type.tensor_type
    steps, batch, size = (d.dim_value for d in x.shape.dim)
    new = helper.make_graph([node], graph.name,
                            [helper.make_tensor_value_info("X", x.elem_type,
                                                           (batch, steps, size))],
                            [helper.make_empty_tensor_value_info(o.name) for o in graph.output],
                            initializer=inits)
    return make_model(list(new.node), list(new.input),
                      [o.name for o in graph.output], initializers=list(new.initializer),
                      opset=14)


@pytest.mark.parametrize("op", sorted(GATES))
@pytest.mark.parametrize("lens_input", [False, True])
def test_sequence_lens_keep_the_state_and_zero_y_past_the_end(op, lens_input):
    got = check(*recurrent_model(op, steps=6, batch=4, direction="bidirectional",
                                 initial=True, lens=[6, 2, 4, 1], lens_input=lens_input))
    assert not got["Y"][2:, :, 1].any() and got["Y"][:2, :, 1].all()  # batch 1: 2 steps


def test_lstm_clip_input_forget_and_activations_with_parameters():
    check(*recurrent_model(
        "LSTM", direction="bidirectional", initial=True, clip=0.7, input_forget=1,
        activations=["HardSigmoid", "Elu", "Softsign", "Sigmoid", "ScaledTanh", "Tanh"],
        activation_alpha=[0.3, 0.8, 1.5], activation_beta=[0.4, 0.6]))


@pytest.mark.parametrize("linear_before_reset", [0, 1])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_linear_before_reset(linear_before_reset, direction):
    check(*recurrent_model("GRU", direction=direction, initial=True,
                           linear_before_reset=linear_before_reset, seed=1))


@pytest.mark.parametrize("activation", ["Relu", "LeakyRelu", "ThresholdedRelu", "Affine",
                                        "Softplus"])
def test_rnn_activations(activation):
    alpha = {"LeakyRelu": [0.2], "ThresholdedRelu": [0.1], "Affine": [0.5]}.get(activation)
    check(*recurrent_model("RNN", activations=[activation], seed=2, hidden=5,
                           **({"activation_alpha": alpha} if alpha else {}),
                           **({"activation_beta": [0.25]} if activation == "Affine" else {})))


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_without_bias_and_float64(op):
    """float64, which onnxruntime's recurrent kernels refuse: against the reference
    interpreter in float64, and onnxruntime on the float32 model."""
    model, feeds = recurrent_model(op, bias=False, dtype="float64", initial=True,
                                   direction="reverse")
    got = run_polyc(model, feeds)
    reference = run_reference(model, feeds)
    single, _ = recurrent_model(op, bias=False, initial=True, direction="reverse")
    want = run_onnxruntime(single, {"X": feeds["X"].astype(np.float32)})
    for name in want:
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], reference[name], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-5)


def test_a_larger_lstm_whose_products_get_the_contraction_recipe():
    """12 steps, batch 5, 40 inputs, 48 hidden units: the input projection and both
    directions' recurrent products (inside the time loop) run as register-tiled
    contractions with R packed at compile time."""
    model, feeds = recurrent_model("LSTM", steps=12, batch=5, inputs=40, hidden=48,
                                   initial=True, direction="bidirectional", seed=3)
    check(model, feeds, 1e-4)
    decisions = str(polyc.compile(model, threads=1).compilation.schedule)
    recipes = [line for line in decisions.splitlines() if "tiling: contraction" in line]
    assert sum("lstm_recurrent:" in line and "R packed" in line for line in recipes) == 2
    assert any("input_projection" in line for line in recipes)


def test_the_reference_interpreter_runs_the_recurrence():
    model, feeds = recurrent_model("LSTM", direction="bidirectional", initial=True,
                                   lens=[5, 3, 1], peepholes=True, seed=4)
    want = run_onnxruntime(model, feeds)
    got = run_reference(model, feeds)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=2e-5, atol=2e-5,
                                   err_msg=name)


def test_the_time_loop_is_one_fusion_group_and_the_schedule_is_legal():
    model, _ = recurrent_model("GRU", direction="bidirectional", seed=5)
    compiled = polyc.compile(model, threads=1)
    text = compiled.inspect()
    assert "gru_h" in text
    groups = [g for g in compiled.compilation.groups.groups if any("gru" in s for s in g)]
    assert len(groups) == 1
    # both directions' recurrent products (z and r, then h on the reset state; an init
    # and an update each) are in it
    assert sum("gru_recurrent" in s for s in groups[0]) == 8


def test_unknown_activation_is_refused():
    model, _ = recurrent_model("RNN", activations=["Swish"])
    with pytest.raises(UnsupportedOpError, match="activation 'swish'"):
        polyc.compile(model)


def test_unknown_direction_is_refused():
    model, _ = recurrent_model("LSTM", direction="sideways")
    with pytest.raises(UnsupportedOpError, match="direction 'sideways'"):
        polyc.compile(model)


def test_a_dynamic_sequence_length_asks_for_a_dim():
    model, _ = recurrent_model("RNN")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "seq"
    with pytest.raises(PolycError, match="seq"):
        polyc.compile(model)


@pytest.mark.parametrize("op", sorted(GATES))
def test_the_versions_before_7_give_the_same_outputs(op):
    """LSTM-1, GRU-1 and RNN-1 (opset 6; onnxruntime has no kernel for them) against
    onnxruntime on the same node at opset 13."""
    model, feeds = recurrent_model(op, initial=True, direction="bidirectional", seed=6)
    want = run_onnxruntime(model, feeds)
    model.opset_import[0].version = 6
    got = run_polyc(model, feeds)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=2e-5, atol=2e-5, err_msg=name)


@pytest.mark.parametrize("op", ["LSTM"])
def test_cells_of_a_large_batch_run_in_parallel_each_step(op):
    """Batch 16 x 256 hidden units on 2 threads: the cell statements under the time loop
    are a parallel loop (RECURRENT_MIN_INSTANCES), the results onnxruntime's."""
    model, feeds = recurrent_model(op, steps=4, batch=16, inputs=32, hidden=256, seed=5)
    compiled = polyc.compile(model, threads=2)
    cells = [d for d in compiled.schedule.decisions if d.startswith("parallel:")
             and (f"{op.lower()}_h" in d)]
    assert cells, compiled.schedule.decisions
    want = run_onnxruntime(model, feeds)
    got = compiled.run(feeds)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-4, err_msg=name)
