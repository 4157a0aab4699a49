"""PolyBench-style kernels written with :class:`polyc.scop.nest.LoopNest`.

The classic inputs of polyhedral schedulers (Pluto's test set): stencils with a time
loop, linear algebra with imperfect nests and triangular domains, chains of matrix
products. Each :class:`Kernel` builds its nest, gives small default parameter values,
random inputs, and a numpy reference that runs the original loops in float32, so a
compiled schedule can be checked against it::

    kernel = KERNELS["jacobi-2d"]
    arrays = kernel.inputs(seed=0)
    out = kernel.build().compile(params=kernel.params).run(arrays)
    expected = kernel.reference(kernel.params, arrays)

Loops follow PolyBench 4 where it has the kernel, Pluto's examples otherwise
(``heat3d`` with a single statement and a two-plane time buffer, ``lu`` in its
right-looking form). Statement names are ``S1``, ``S2``... in textual order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from polyc.scop.nest import LoopNest
from polyc.scop.params import bind_parameters

Arrays = dict[str, np.ndarray]
F = np.float32


@dataclass(frozen=True)
class Kernel:
    name: str
    build: Callable[[], LoopNest]
    reference: Callable[[Mapping[str, int], Arrays], Arrays]  # final value of every array
    params: Mapping[str, int]  # small default values
    prepare: Callable[[Arrays], Arrays] | None = field(default=None, repr=False)

    def inputs(self, seed: int = 0, params: Mapping[str, int] | None = None) -> Arrays:
        """Seeded random values for every array the nest reads before writing."""
        scop = bind_parameters(self.build().scop(), params or self.params)
        rng = np.random.default_rng(seed)
        arrays = {a.name: rng.standard_normal(a.shape).astype(F)
                  for a in scop.arrays if a.kind == "inout"}
        return self.prepare(arrays) if self.prepare else arrays


def _copy(arrays: Arrays, params, nest: LoopNest) -> Arrays:
    """The reference's starting state: given arrays copied, the others zero."""
    scop = bind_parameters(nest.scop(), params)
    return {a.name: arrays[a.name].copy() if a.name in arrays else np.zeros(a.shape, F)
            for a in scop.arrays}


# -- stencils -------------------------------------------------------------------------

def jacobi1d() -> LoopNest:
    """Imperfect: B from A, then A from B, inside one time loop."""
    nest = LoopNest("jacobi1d", params=["T", "N"])
    A, B = nest.array("A", ("N",)), nest.array("B", ("N",))
    domain = "{ [t, i] : 0 <= t < T and 1 <= i < N - 1 }"
    nest.statement("S1", domain, write=B["i"], expr=(A["i - 1"] + A["i"] + A["i + 1"]) * 0.33333,
                   schedule="{ [t, i] -> [t, 0, i] }")
    nest.statement("S2", domain, write=A["i"], expr=B["i"], schedule="{ [t, i] -> [t, 1, i] }")
    return nest


def jacobi1d_reference(p, arrays):
    s = _copy(arrays, p, jacobi1d())
    a, b = s["A"], s["B"]
    for _ in range(p["T"]):
        for i in range(1, p["N"] - 1):
            b[i] = (a[i - 1] + a[i] + a[i + 1]) * F(0.33333)
        a[1:-1] = b[1:-1]
    return s


def jacobi2d() -> LoopNest:
    nest = LoopNest("jacobi2d", params=["T", "N"])
    A, B = nest.array("A", ("N", "N")), nest.array("B", ("N", "N"))
    domain = "{ [t, i, j] : 0 <= t < T and 1 <= i < N - 1 and 1 <= j < N - 1 }"
    nest.statement("S1", domain, write=B["i", "j"],
                   expr=0.2 * (A["i", "j"] + A["i", "j - 1"] + A["i", "j + 1"] + A["i + 1", "j"]
                               + A["i - 1", "j"]),
                   schedule="{ [t, i, j] -> [t, 0, i, j] }")
    nest.statement("S2", domain, write=A["i", "j"], expr=B["i", "j"],
                   schedule="{ [t, i, j] -> [t, 1, i, j] }")
    return nest


def jacobi2d_reference(p, arrays):
    s = _copy(arrays, p, jacobi2d())
    a, b = s["A"], s["B"]
    for _ in range(p["T"]):
        b[1:-1, 1:-1] = F(0.2) * (a[1:-1, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] + a[2:, 1:-1]
                                  + a[:-2, 1:-1])
        a[1:-1, 1:-1] = b[1:-1, 1:-1]
    return s


def seidel2d() -> LoopNest:
    """In place: A is read and written by the one statement."""
    nest = LoopNest("seidel2d", params=["T", "N"])
    A = nest.array("A", ("N", "N"))
    reads = [A[f"i + {di}", f"j + {dj}"] for di in (-1, 0, 1) for dj in (-1, 0, 1)]
    nest.statement("S1", "{ [t, i, j] : 0 <= t < T and 1 <= i < N - 1 and 1 <= j < N - 1 }",
                   write=A["i", "j"], expr=sum(reads[1:], reads[0]) / 9.0)
    return nest


def seidel2d_reference(p, arrays):
    s = _copy(arrays, p, seidel2d())
    a, n = s["A"], p["N"]
    for _ in range(p["T"]):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                total = a[i - 1, j - 1]
                for di, dj in [(-1, 0), (-1, 1), (0, -1), (0, 0), (0, 1), (1, -1), (1, 0),
                               (1, 1)]:
                    total = total + a[i + di, j + dj]
                a[i, j] = total / F(9)
    return s


def heat3d() -> LoopNest:
    """One statement; time step t reads plane t mod 2 and writes plane (t + 1) mod 2."""
    nest = LoopNest("heat3d", params=["T", "N"])
    A = nest.array("A", (2, "N", "N", "N"))

    def at(di=0, dj=0, dk=0):
        return A["t mod 2", f"i + {di}", f"j + {dj}", f"k + {dk}"]

    centre = at()
    expr = centre + 0.125 * (at(1) - 2.0 * centre + at(-1)) \
        + 0.125 * (at(0, 1) - 2.0 * centre + at(0, -1)) \
        + 0.125 * (at(0, 0, 1) - 2.0 * centre + at(0, 0, -1))
    nest.statement("S1", "{ [t, i, j, k] : 0 <= t < T and 1 <= i, j, k < N - 1 }",
                   write=A["(t + 1) mod 2", "i", "j", "k"], expr=expr)
    return nest


def heat3d_reference(p, arrays):
    s = _copy(arrays, p, heat3d())
    a, eighth, two = s["A"], F(0.125), F(2)
    for t in range(p["T"]):
        c = a[t % 2]
        mid = c[1:-1, 1:-1, 1:-1]
        a[(t + 1) % 2, 1:-1, 1:-1, 1:-1] = (
            mid + eighth * (c[2:, 1:-1, 1:-1] - two * mid + c[:-2, 1:-1, 1:-1])
            + eighth * (c[1:-1, 2:, 1:-1] - two * mid + c[1:-1, :-2, 1:-1])
            + eighth * (c[1:-1, 1:-1, 2:] - two * mid + c[1:-1, 1:-1, :-2]))
    return s


def fdtd2d() -> LoopNest:
    nest = LoopNest("fdtd2d", params=["T", "NX", "NY"])
    ex, ey, hz = (nest.array(n, ("NX", "NY")) for n in ("ex", "ey", "hz"))
    fict = nest.array("fict", ("T",))
    nest.statement("S1", "{ [t, j] : 0 <= t < T and 0 <= j < NY }", write=ey["0", "j"],
                   expr=fict["t"], schedule="{ [t, j] -> [t, 0, j, 0] }")
    nest.statement("S2", "{ [t, i, j] : 0 <= t < T and 1 <= i < NX and 0 <= j < NY }",
                   write=ey["i", "j"], expr=ey["i", "j"] - 0.5 * (hz["i", "j"] - hz["i - 1", "j"]),
                   schedule="{ [t, i, j] -> [t, 1, i, j] }")
    nest.statement("S3", "{ [t, i, j] : 0 <= t < T and 0 <= i < NX and 1 <= j < NY }",
                   write=ex["i", "j"], expr=ex["i", "j"] - 0.5 * (hz["i", "j"] - hz["i", "j - 1"]),
                   schedule="{ [t, i, j] -> [t, 2, i, j] }")
    nest.statement("S4", "{ [t, i, j] : 0 <= t < T and 0 <= i < NX - 1 and 0 <= j < NY - 1 }",
                   write=hz["i", "j"],
                   expr=hz["i", "j"] - 0.7 * (ex["i", "j + 1"] - ex["i", "j"] + ey["i + 1", "j"]
                                              - ey["i", "j"]),
                   schedule="{ [t, i, j] -> [t, 3, i, j] }")
    return nest


def fdtd2d_reference(p, arrays):
    s = _copy(arrays, p, fdtd2d())
    ex, ey, hz, fict = s["ex"], s["ey"], s["hz"], s["fict"]
    half, c7 = F(0.5), F(0.7)
    for t in range(p["T"]):
        ey[0, :] = fict[t]
        ey[1:, :] = ey[1:, :] - half * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] = ex[:, 1:] - half * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] = hz[:-1, :-1] - c7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1]
                                            - ey[:-1, :-1])
    return s


# -- linear algebra -------------------------------------------------------------------

def matmul() -> LoopNest:
    nest = LoopNest("matmul", params=["M", "N", "K"])
    A, B, C = nest.array("A", ("M", "K")), nest.array("B", ("K", "N")), nest.array("C", ("M", "N"))
    nest.statement("S1", "{ [i, j] : 0 <= i < M and 0 <= j < N }", write=C["i", "j"], expr=0.0)
    nest.statement("S2", "{ [i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }",
                   write=C["i", "j"], expr=C["i", "j"] + A["i", "k"] * B["k", "j"])
    return nest


def _product(a, b):
    """``a @ b`` summed over k in increasing order, in float32, like the loops."""
    out = np.zeros((a.shape[0], b.shape[1]), F)
    for k in range(a.shape[1]):
        out = out + np.outer(a[:, k], b[k, :])
    return out


def matmul_reference(p, arrays):
    s = _copy(arrays, p, matmul())
    s["C"] = _product(s["A"], s["B"])
    return s


def lu() -> LoopNest:
    """In-place LU without pivoting (right-looking)."""
    nest = LoopNest("lu", params=["N"])
    A = nest.array("A", ("N", "N"))
    nest.statement("S1", "{ [k, j] : 0 <= k < N and k < j < N }", write=A["k", "j"],
                   expr=A["k", "j"] / A["k", "k"], schedule="{ [k, j] -> [k, 0, j, 0] }")
    nest.statement("S2", "{ [k, i, j] : 0 <= k < N and k < i < N and k < j < N }",
                   write=A["i", "j"], expr=A["i", "j"] - A["i", "k"] * A["k", "j"],
                   schedule="{ [k, i, j] -> [k, 1, i, j] }")
    return nest


def lu_reference(p, arrays):
    s = _copy(arrays, p, lu())
    a = s["A"]
    for k in range(p["N"]):
        a[k, k + 1:] = a[k, k + 1:] / a[k, k]
        a[k + 1:, k + 1:] = a[k + 1:, k + 1:] - np.outer(a[k + 1:, k], a[k, k + 1:])
    return s


def _diagonally_dominant(name: str):
    def prepare(arrays):
        a = arrays[name]
        arrays[name] = (a + F(a.shape[0]) * np.eye(a.shape[0], dtype=F)).astype(F)
        return arrays
    return prepare


def mvt() -> LoopNest:
    nest = LoopNest("mvt", params=["N"])
    A = nest.array("A", ("N", "N"))
    x1, x2, y1, y2 = (nest.array(n, ("N",)) for n in ("x1", "x2", "y1", "y2"))
    box = "{ [i, j] : 0 <= i < N and 0 <= j < N }"
    nest.statement("S1", box, write=x1["i"], expr=x1["i"] + A["i", "j"] * y1["j"])
    nest.statement("S2", box, write=x2["i"], expr=x2["i"] + A["j", "i"] * y2["j"])
    return nest


def _matvec(x, a, y):
    """``x + a @ y`` summed over j in increasing order."""
    for j in range(a.shape[1]):
        x = x + a[:, j] * y[j]
    return x


def mvt_reference(p, arrays):
    s = _copy(arrays, p, mvt())
    s["x1"] = _matvec(s["x1"], s["A"], s["y1"])
    s["x2"] = _matvec(s["x2"], s["A"].T, s["y2"])
    return s


def gemver() -> LoopNest:
    nest = LoopNest("gemver", params=["N"])
    A = nest.array("A", ("N", "N"))
    u1, v1, u2, v2, w, x, y, z = (nest.array(n, ("N",))
                                  for n in ("u1", "v1", "u2", "v2", "w", "x", "y", "z"))
    box = "{ [i, j] : 0 <= i < N and 0 <= j < N }"
    nest.statement("S1", box, write=A["i", "j"],
                   expr=A["i", "j"] + u1["i"] * v1["j"] + u2["i"] * v2["j"])
    nest.statement("S2", box, write=x["i"], expr=x["i"] + 1.2 * A["j", "i"] * y["j"])
    nest.statement("S3", "{ [i] : 0 <= i < N }", write=x["i"], expr=x["i"] + z["i"])
    nest.statement("S4", box, write=w["i"], expr=w["i"] + 1.5 * A["i", "j"] * x["j"])
    return nest


def gemver_reference(p, arrays):
    s = _copy(arrays, p, gemver())
    a = s["A"] + np.outer(s["u1"], s["v1"]) + np.outer(s["u2"], s["v2"])
    s["A"] = a
    s["x"] = _matvec(s["x"], F(1.2) * a.T, s["y"]) + s["z"]
    s["w"] = _matvec(s["w"], F(1.5) * a, s["x"])
    return s


def _init_and_update(nest, name, out, left, right, dims):
    """``out = left @ right`` as an init statement and an update statement."""
    (i, ni), (j, nj), (k, nk) = dims
    n = len(nest._statements)
    nest.statement(f"S{n + 1}", f"{{ [{i}, {j}] : 0 <= {i} < {ni} and 0 <= {j} < {nj} }}",
                   write=out[i, j], expr=0.0)
    nest.statement(f"S{n + 2}", f"{{ [{i}, {j}, {k}] : 0 <= {i} < {ni} and 0 <= {j} < {nj} "
                   f"and 0 <= {k} < {nk} }}",
                   write=out[i, j], expr=out[i, j] + left[i, k] * right[k, j])


def mm2() -> LoopNest:
    """tmp = A B; D = 1.2 D + tmp C."""
    nest = LoopNest("mm2", params=["NI", "NJ", "NK", "NL"])
    A, B, C, D = (nest.array(n, s) for n, s in
                  [("A", ("NI", "NK")), ("B", ("NK", "NJ")), ("C", ("NJ", "NL")),
                   ("D", ("NI", "NL"))])
    tmp = nest.array("tmp", ("NI", "NJ"))
    _init_and_update(nest, "tmp", tmp, A, B, [("i", "NI"), ("j", "NJ"), ("k", "NK")])
    nest.statement("S3", "{ [i, l] : 0 <= i < NI and 0 <= l < NL }", write=D["i", "l"],
                   expr=D["i", "l"] * 1.2)
    nest.statement("S4", "{ [i, l, j] : 0 <= i < NI and 0 <= l < NL and 0 <= j < NJ }",
                   write=D["i", "l"], expr=D["i", "l"] + tmp["i", "j"] * C["j", "l"])
    return nest


def mm2_reference(p, arrays):
    s = _copy(arrays, p, mm2())
    s["tmp"] = _product(s["A"], s["B"])
    d = s["D"] * F(1.2)
    for j in range(p["NJ"]):
        d = d + np.outer(s["tmp"][:, j], s["C"][j, :])
    s["D"] = d
    return s


def mm3() -> LoopNest:
    """E = A B; F = C D; G = E F."""
    nest = LoopNest("mm3", params=["NI", "NJ", "NK", "NL", "NM"])
    A, B, C, D = (nest.array(n, s) for n, s in
                  [("A", ("NI", "NK")), ("B", ("NK", "NJ")), ("C", ("NJ", "NM")),
                   ("D", ("NM", "NL"))])
    E, Fa, G = (nest.array(n, s) for n, s in
                [("E", ("NI", "NJ")), ("F", ("NJ", "NL")), ("G", ("NI", "NL"))])
    _init_and_update(nest, "E", E, A, B, [("i", "NI"), ("j", "NJ"), ("k", "NK")])
    _init_and_update(nest, "F", Fa, C, D, [("i", "NJ"), ("j", "NL"), ("k", "NM")])
    _init_and_update(nest, "G", G, E, Fa, [("i", "NI"), ("j", "NL"), ("k", "NJ")])
    return nest


def mm3_reference(p, arrays):
    s = _copy(arrays, p, mm3())
    s["E"] = _product(s["A"], s["B"])
    s["F"] = _product(s["C"], s["D"])
    s["G"] = _product(s["E"], s["F"])
    return s


def doitgen() -> LoopNest:
    nest = LoopNest("doitgen", params=["NR", "NQ", "NP"])
    A = nest.array("A", ("NR", "NQ", "NP"))
    C4, total = nest.array("C4", ("NP", "NP")), nest.array("sum", ("NP",))
    outer = "0 <= r < NR and 0 <= q < NQ and 0 <= p < NP"
    nest.statement("S1", f"{{ [r, q, p] : {outer} }}", write=total["p"], expr=0.0,
                   schedule="{ [r, q, p] -> [r, q, 0, p, 0, 0] }")
    nest.statement("S2", f"{{ [r, q, p, s] : {outer} and 0 <= s < NP }}", write=total["p"],
                   expr=total["p"] + A["r", "q", "s"] * C4["s", "p"],
                   schedule="{ [r, q, p, s] -> [r, q, 0, p, 1, s] }")
    nest.statement("S3", f"{{ [r, q, p] : {outer} }}", write=A["r", "q", "p"], expr=total["p"],
                   schedule="{ [r, q, p] -> [r, q, 1, p, 0, 0] }")
    return nest


def doitgen_reference(p, arrays):
    s = _copy(arrays, p, doitgen())
    a, c4 = s["A"], s["C4"]
    for r in range(p["NR"]):
        for q in range(p["NQ"]):
            total = np.zeros(p["NP"], F)
            for k in range(p["NP"]):
                total = total + a[r, q, k] * c4[k, :]
            a[r, q, :] = total
            s["sum"] = total
    return s


def trisolv() -> LoopNest:
    """Forward substitution L x = b over the triangle { [i, j] : 0 <= j < i < N }."""
    nest = LoopNest("trisolv", params=["N"])
    L, b, x = nest.array("L", ("N", "N")), nest.array("b", ("N",)), nest.array("x", ("N",))
    nest.statement("S1", "{ [i] : 0 <= i < N }", write=x["i"], expr=b["i"],
                   schedule="{ [i] -> [i, 0, 0] }")
    nest.statement("S2", "{ [i, j] : 0 <= j < i < N }", write=x["i"],
                   expr=x["i"] - L["i", "j"] * x["j"], schedule="{ [i, j] -> [i, 1, j] }")
    nest.statement("S3", "{ [i] : 0 <= i < N }", write=x["i"], expr=x["i"] / L["i", "i"],
                   schedule="{ [i] -> [i, 2, 0] }")
    return nest


def trisolv_reference(p, arrays):
    s = _copy(arrays, p, trisolv())
    lower, b, x = s["L"], s["b"], s["x"]
    for i in range(p["N"]):
        x[i] = b[i]
        for j in range(i):
            x[i] = x[i] - lower[i, j] * x[j]
        x[i] = x[i] / lower[i, i]
    return s


# -- fusion ---------------------------------------------------------------------------

def fusion() -> LoopNest:
    """A 2-d producer, its 2-d consumer, then a 1-d consumer: nofuse distributes all
    three, smartfuse fuses the two 2-d nests, maxfuse also the 1-d one."""
    nest = LoopNest("fusion", params=["M", "N"])
    A, B, C = (nest.array(n, ("M", "N")) for n in ("A", "B", "C"))
    y = nest.array("y", ("M",))
    box = "{ [i, j] : 0 <= i < M and 0 <= j < N }"
    nest.statement("S1", box, write=B["i", "j"], expr=A["i", "j"] * 2.0)
    nest.statement("S2", box, write=C["i", "j"], expr=B["i", "j"] + A["i", "j"])
    nest.statement("S3", "{ [i] : 0 <= i < M }", write=y["i"], expr=C["i", "0"] - C["i", "N - 1"])
    return nest


def fusion_reference(p, arrays):
    s = _copy(arrays, p, fusion())
    s["B"] = s["A"] * F(2)
    s["C"] = s["B"] + s["A"]
    s["y"] = s["C"][:, 0] - s["C"][:, -1]
    return s


def independent() -> LoopNest:
    """Three statements that only read A: no dependences at all."""
    nest = LoopNest("independent", params=["M", "N"])
    A = nest.array("A", ("M", "N"))
    relu, neg_t, half_exp = (nest.array(n, s) for n, s in
                             [("R", ("M", "N")), ("T", ("N", "M")), ("E", ("M", "N"))])
    box = "{ [i, j] : 0 <= i < M and 0 <= j < N }"
    nest.statement("S1", box, write=relu["i", "j"], expr=nest.fn.max(A["i", "j"], 0.0))
    nest.statement("S2", box, write=neg_t["j", "i"], expr=-A["i", "j"])
    nest.statement("S3", box, write=half_exp["i", "j"], expr=nest.fn.exp(A["i", "j"]) * 0.5)
    return nest


def independent_reference(p, arrays):
    s = _copy(arrays, p, independent())
    s["R"], s["T"], s["E"] = np.maximum(s["A"], 0), -s["A"].T, np.exp(s["A"]) * F(0.5)
    return s


class _Kernels(dict):
    """The kernels by PolyBench's spelling (``jacobi-2d``, ``2mm``); the names they had
    before (``jacobi2d``, ``mm2``: no hyphen, letters first) still find them, and an
    unknown name's KeyError lists the kernels."""

    def __missing__(self, name):
        for kernel in self.values():
            if isinstance(name, str) and _older(kernel.name) == name:
                return kernel
        raise KeyError(f"no loop-nest kernel {name!r}; choose one of {', '.join(self)}")


def _older(name: str) -> str:
    """``jacobi-2d`` -> ``jacobi2d``, ``2mm`` -> ``mm2``: the names before PolyBench's."""
    name = name.replace("-", "")
    return name[1:] + name[0] if name[0].isdigit() else name


KERNELS: dict[str, Kernel] = _Kernels({k.name: k for k in [
    Kernel("matmul", matmul, matmul_reference, {"M": 7, "N": 5, "K": 9}),
    Kernel("jacobi-1d", jacobi1d, jacobi1d_reference, {"T": 6, "N": 30}),
    Kernel("jacobi-2d", jacobi2d, jacobi2d_reference, {"T": 4, "N": 12}),
    Kernel("seidel-2d", seidel2d, seidel2d_reference, {"T": 3, "N": 12}),
    Kernel("heat-3d", heat3d, heat3d_reference, {"T": 3, "N": 8}),
    Kernel("fdtd-2d", fdtd2d, fdtd2d_reference, {"T": 4, "NX": 10, "NY": 12}),
    Kernel("lu", lu, lu_reference, {"N": 12}, prepare=_diagonally_dominant("A")),
    Kernel("mvt", mvt, mvt_reference, {"N": 13}),
    Kernel("gemver", gemver, gemver_reference, {"N": 11}),
    Kernel("2mm", mm2, mm2_reference, {"NI": 6, "NJ": 7, "NK": 8, "NL": 9}),
    Kernel("3mm", mm3, mm3_reference, {"NI": 6, "NJ": 7, "NK": 8, "NL": 9, "NM": 5}),
    Kernel("doitgen", doitgen, doitgen_reference, {"NR": 3, "NQ": 4, "NP": 6}),
    Kernel("trisolv", trisolv, trisolv_reference, {"N": 16}, prepare=_diagonally_dominant("L")),
    Kernel("fusion", fusion, fusion_reference, {"M": 6, "N": 5}),
    Kernel("independent", independent, independent_reference, {"M": 6, "N": 4}),
]})
