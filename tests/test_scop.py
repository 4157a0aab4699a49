"""SCoP construction and exact dependences, compared as isl objects."""

import islpy as isl

from polyc.islutil import flat_offset
from polyc.scop.build import build_scop
from polyc.scop.dependences import compute_dependences

from core_graphs import matmul_relu, reshape_transpose


def _set(scop, text):
    return isl.Set.read_from_str(scop.ctx, text)


def _map(scop, text):
    return isl.Map.read_from_str(scop.ctx, text)


def _umap(scop, text):
    return isl.UnionMap.read_from_str(scop.ctx, text)


def test_matmul_becomes_init_and_update_statements():
    scop = build_scop(matmul_relu(m=4, k=5, n=3))
    names = [s.name for s in scop.statements]
    assert names == ["S0_matmul_init", "S1_matmul_update", "S2_relu"]
    init, update, relu = scop.statements
    assert init.domain == _set(scop, "{ S0_matmul_init[i, j] : 0 <= i < 4 and 0 <= j < 3 }")
    assert update.domain == _set(
        scop, "{ S1_matmul_update[i, j, k] : 0 <= i < 4 and 0 <= j < 3 and 0 <= k < 5 }")
    # the update reads its accumulator first, then a[i, k] and w[k, j]
    assert [r.array for r in update.reads] == ["mm", "a", "w"]
    expected_a = _map(scop, "{ S1_matmul_update[i, j, k] -> a[i, k] : "
                            "0 <= i < 4 and 0 <= j < 3 and 0 <= k < 5 }")
    assert update.reads[1].relation.is_equal(expected_a)
    assert relu.write.relation.is_equal(
        _map(scop, "{ S2_relu[i, j] -> y[i, j] : 0 <= i < 4 and 0 <= j < 3 }"))
    assert {a.name: a.kind for a in scop.arrays} == {
        "a": "input", "w": "constant", "y": "output", "mm": "temp"}


def test_matmul_relu_dependences_are_exact():
    scop = compute_dependences(build_scop(matmul_relu(m=4, k=5, n=3)))
    deps = scop.dependences
    dom = "0 <= i < 4 and 0 <= j < 3"
    expected_raw = _umap(scop, (
        "{ S0_matmul_init[i, j] -> S1_matmul_update[i, j, 0] : " + dom + ";"
        " S1_matmul_update[i, j, k] -> S1_matmul_update[i, j, k + 1] : " + dom + " and 0 <= k < 4;"
        " S1_matmul_update[i, j, 4] -> S2_relu[i, j] : " + dom + " }"))
    assert deps.raw.is_equal(expected_raw)
    expected_waw = _umap(scop, (
        "{ S0_matmul_init[i, j] -> S1_matmul_update[i, j, 0] : " + dom + ";"
        " S1_matmul_update[i, j, k] -> S1_matmul_update[i, j, k + 1] : "
        + dom + " and 0 <= k < 4 }"))
    assert deps.waw.is_equal(expected_waw)
    expected_war = _umap(scop, (
        "{ S1_matmul_update[i, j, k] -> S1_matmul_update[i, j, k2] : "
        + dom + " and 0 <= k < k2 < 5 }"))
    assert deps.war.is_equal(expected_war)


def test_views_compose_into_quasi_affine_access_with_affine_offset():
    scop = build_scop(reshape_transpose((2, 3, 4)))
    (statement,) = scop.statements
    (read,) = statement.reads
    assert read.array == "x"
    # y[c, f] reads t[c, f] = r[f, c] = x[f / 3, f mod 3, c]
    expected = _map(scop, "{ S0_add[c, f] -> x[floor(f / 3), f mod 3, c] : "
                          "0 <= c < 4 and 0 <= f < 6 }")
    assert read.relation.is_equal(expected)
    offset = flat_offset(read.relation, (2, 3, 4)).intersect_domain(statement.domain)
    assert offset.is_equal(isl.PwAff.read_from_str(
        scop.ctx, "{ S0_add[c, f] -> [(4f + c)] : 0 <= c < 4 and 0 <= f < 6 }"))


def test_scop_prints_its_sections():
    text = str(compute_dependences(build_scop(matmul_relu())))
    for section in ("ARRAYS", "DOMAINS", "ACCESSES", "BODIES", "DEPENDENCES", "SCHEDULE"):
        assert f"\n{section}" in "\n" + text
    assert "T(S1_matmul_update): (1, i0, i1, i2)" in text
    assert "S1_matmul_update: W = add(R0, mul(R1, R2))" in text


def _whole_program_dependences(scop):
    """RAW, WAR and WAW by one isl analysis of the whole program, over its schedule tree
    (what polyc did before it analysed one written array at a time)."""
    def flow(sink, must=None, may=None):
        info = isl.UnionAccessInfo.from_sink(sink)
        if must is not None:
            info = info.set_must_source(must)
        if may is not None:
            info = info.set_may_source(may)
        return info.set_schedule(scop.order).compute_flow()

    reads, writes = scop.reads, scop.writes
    return (flow(reads, must=writes).get_must_dependence(),
            flow(writes, may=reads).get_may_dependence(),
            flow(writes, must=writes).get_must_dependence())


def test_dependences_array_by_array_equal_one_analysis_of_the_whole_program():
    """The kernels of scop/polybench.py and 60 random programs (parameters, reductions,
    in-place updates, several statements per array): the same RAW, WAR and WAW."""
    from polyc.fuzz import programs
    from polyc.scop.polybench import KERNELS

    scops = [kernel.build().scop() for kernel in KERNELS.values()]
    scops += [programs.build(programs.generate(seed).program).scop() for seed in range(60)]
    for scop in scops:
        deps = compute_dependences(scop).dependences
        assert deps.exact
        whole = _whole_program_dependences(scop)
        if scop.context is not None:
            whole = tuple(d.intersect_params(scop.context) for d in whole)
        for got, want in zip((deps.raw, deps.war, deps.waw), whole, strict=True):
            assert got.is_equal(want), [s.name for s in scop.statements]


def test_dependences_after_packing_reuse_the_relations_of_untouched_arrays(monkeypatch):
    """Tiling analyses the SCoP again once its packing copies are in, taking the
    relations through the arrays packing left alone from the first analysis: the
    same RAW, WAR and WAW as a fresh analysis (a matmul of two inputs, packed by a
    copy, then a conv chain whose weights are packed at compile time)."""
    from onnx import helper
    from test_channels_last import Net

    import polyc.tiling
    from polyc.pipeline import Options, lower

    from onnx_helpers import make_model

    analysed = []

    def both(scop, **kwargs):
        reused = compute_dependences(scop, **kwargs).dependences
        fresh = compute_dependences(scop).dependences
        assert kwargs["since"].by_array and set(kwargs["changed"])
        assert len(reused.by_array) == len(fresh.by_array)
        for got, want in zip((reused.raw, reused.war, reused.waw),
                             (fresh.raw, fresh.war, fresh.waw), strict=True):
            assert got.is_equal(want)
        analysed.append(scop)
        return compute_dependences(scop, **kwargs)

    monkeypatch.setattr(polyc.tiling, "compute_dependences", both)
    matmul = make_model([helper.make_node("MatMul", ["a", "b"], ["m"]),
                         helper.make_node("Relu", ["m"], ["y"])],
                        [("a", [64, 96]), ("b", [96, 80])], ["y"])
    net = Net(16, 11)
    convs = net.model(net.conv(net.node("Relu", net.conv("x", 16, 32, 3)), 32, 24, 1))
    for model in (matmul, convs):
        lower(model, Options(threads=1))
    assert len(analysed) == 2
