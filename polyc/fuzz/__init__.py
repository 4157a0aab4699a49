"""Fuzzing polyc against independent references.

Two fuzzers, each a module with the same five functions:

- :mod:`polyc.fuzz.graphs`: random ONNX graphs of ops polyc supports, compared with
  onnxruntime;
- :mod:`polyc.fuzz.programs`: random affine loop programs (:class:`~polyc.scop.nest.LoopNest`),
  compared with a plain-Python interpreter of their original order.

A fuzzer module provides

``generate(seed: int) -> case``
    a case, a function of ``seed`` alone (same seed, same case), carrying the compile
    options it runs under (a :class:`Config`);
``check(case) -> None``
    compiles and runs the case and compares with the reference; raises
    :class:`Mismatch` on a wrong answer; any other exception is a failure too;
``smaller(case) -> Iterable[case]``
    candidates strictly smaller than ``case`` (fewer ops or statements, smaller shapes,
    simpler expressions), each a valid case, best reductions first; shrinking keeps the
    first candidate that still fails the same way and asks again;
``describe(case) -> str``
    one line (op or statement count, shapes, config);
``reproducer(case) -> str``
    a self-contained Python script that rebuilds the case and runs ``check`` on it.

``python -m polyc.fuzz`` (:mod:`polyc.fuzz.runner`) runs many seeds in worker processes,
each under a time limit, counts the outcomes and shrinks every failure.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SCHEDULERS = ("pluto", "isl")
FUSION = ("none", "smart", "max")


class Mismatch(AssertionError):
    """polyc's answer differs from the reference's (the message says where and by how much)."""


@dataclass(frozen=True)
class Config:
    """The compile options a case runs under."""

    scheduler: str = "pluto"
    fuse: str = "smart"
    tile: bool = True
    threads: int = 1

    @classmethod
    def draw(cls, rng: random.Random) -> Config:
        """Every scheduler, fusion policy, tiling and thread count, uniformly."""
        return cls(rng.choice(SCHEDULERS), rng.choice(FUSION), rng.random() < 0.5,
                   rng.choice((1, 2)))

    def options(self) -> dict:
        """As keyword arguments of ``polyc.compile`` and ``LoopNest.compile``."""
        return {"scheduler": self.scheduler, "fuse": self.fuse, "tile": self.tile,
                "threads": self.threads}

    def __str__(self) -> str:
        return (f"{self.scheduler}/{self.fuse}/{'tiled' if self.tile else 'untiled'}"
                f"/{self.threads}t")
