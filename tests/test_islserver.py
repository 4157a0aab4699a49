"""The serving child for isl work that may run for minutes (polyc/islserver.py): one
child answers many requests; past its time limit a request gets the child killed and
the next request forks a new one; an isl error is an answer of None."""

import islpy as isl

from polyc import islserver

POLYHEDRON = "{ [i, j] : 0 <= i <= 10 and 0 <= j <= i }"
# A reshape's dependence whose Farkas dual took 62 s (graph fuzzer seed 1766).
SLOW = ("{ [i0, i1, i2, j0, j1, j2, k] : k = 27i0 + 9i1 + i2 - 18j0 - 6j1 - 2j2 and "
        "0 <= i0 <= 1 and 0 <= i1 <= 2 and 0 <= i2 <= 8 and 0 <= j0 <= 2 and 0 <= j1 <= 2 "
        "and 0 <= j2 <= 2 and -1 + 27i0 + 9i1 + i2 - 18j0 - 6j1 <= 2j2 "
        "<= 27i0 + 9i1 + i2 - 18j0 - 6j1 }")


def test_the_child_answers_many_requests_and_is_replaced_after_a_timeout():
    ctx = isl.Context()
    want = isl.BasicSet.read_from_str(ctx, POLYHEDRON).coefficients().flatten()
    answers = [islserver.call("coefficients", POLYHEDRON, 10.0) for _ in range(3)]
    first = islserver._child.pid
    assert all(isl.BasicSet.read_from_str(ctx, a).is_equal(want) for a in answers)
    assert islserver.call("coefficients", SLOW, 0.5) is None  # too slow: killed
    assert islserver._child is None
    again = islserver.call("coefficients", POLYHEDRON, 10.0)
    assert isl.BasicSet.read_from_str(ctx, again).is_equal(want)
    assert islserver._child.pid != first


def test_an_isl_error_is_no_answer_and_keeps_the_child():
    assert islserver.call("coefficients", "{ [i] : this is not isl }", 10.0) is None
    child = islserver._child
    assert child is not None
    assert islserver.call("coefficients", POLYHEDRON, 10.0) is not None
    assert islserver._child is child
