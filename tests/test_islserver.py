"""The serving child for isl work that may run for minutes (polyc/islserver.py): one
child answers many requests; past its time limit a request gets the child killed and
the next request forks a new one; an error there is Unanswered and keeps the child."""

import islpy as isl
import pytest

from polyc import islserver
from polyc.scheduler.pluto import dual

POLYHEDRON = "{ [i, j] : 0 <= i <= 10 and 0 <= j <= i }"
# A reshape's dependence whose Farkas dual took 62 s (graph fuzzer seed 1766).
SLOW = ("{ [i0, i1, i2, j0, j1, j2, k] : k = 27i0 + 9i1 + i2 - 18j0 - 6j1 - 2j2 and "
        "0 <= i0 <= 1 and 0 <= i1 <= 2 and 0 <= i2 <= 8 and 0 <= j0 <= 2 and 0 <= j1 <= 2 "
        "and 0 <= j2 <= 2 and -1 + 27i0 + 9i1 + i2 - 18j0 - 6j1 <= 2j2 "
        "<= 27i0 + 9i1 + i2 - 18j0 - 6j1 }")


def joined(ctx: isl.Context, first: str, second: str) -> str:
    """Two texts in, one out: the union of two sets (a request of several texts)."""
    return str(isl.Set.read_from_str(ctx, first).union(isl.Set.read_from_str(ctx, second)))


def test_the_child_answers_many_requests_and_is_replaced_after_a_timeout():
    ctx = isl.Context()
    want = isl.BasicSet.read_from_str(ctx, POLYHEDRON).coefficients().flatten()
    answers = [islserver.call(dual, [POLYHEDRON], 10.0) for _ in range(3)]
    first = islserver._child.pid
    assert all(isl.BasicSet.read_from_str(ctx, a).is_equal(want) for a in answers)
    with pytest.raises(islserver.Unanswered, match="took over 0.5 s"):
        islserver.call(dual, [SLOW], 0.5)  # too slow: killed
    assert islserver._child is None
    again = islserver.call(dual, [POLYHEDRON], 10.0)
    assert isl.BasicSet.read_from_str(ctx, again).is_equal(want)
    assert islserver._child.pid != first


def test_a_request_of_several_texts():
    union = islserver.call(joined, ["{ [i] : 0 <= i < 3 }", "{ [i] : 5 <= i < 7 }"], 10.0)
    want = isl.Set("{ [i] : 0 <= i < 3 or 5 <= i < 7 }")
    assert isl.Set(union).is_equal(want)


def test_an_isl_error_is_unanswered_and_keeps_the_child():
    with pytest.raises(islserver.Unanswered, match="failed: .*Error"):
        islserver.call(dual, ["{ [i] : this is not isl }"], 10.0)
    child = islserver._child
    assert child is not None
    assert islserver.call(dual, [POLYHEDRON], 10.0)
    assert islserver._child is child
