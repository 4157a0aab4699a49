"""polyc tune: the points of a sweep, their checks against the reference, the budget,
the random search, the files written (JSON, CSV, best.json, plots) and the CLI."""

import csv
import json

import numpy as np
import pytest

from polyc.cli import main
from polyc.errors import PolycError
from polyc.tuner import BASELINE, points, results, tune
from polyc.tuner.targets import target


def test_a_grid_compiles_checks_and_times_every_point_against_the_original_loops():
    found = target("jacobi-1d", params={"T": 4, "N": 64})
    chosen = tune(found, sizes=(4, 8), repeat=2, progress=False)
    labels = [p.label for p in chosen]
    assert labels == [BASELINE, "pluto, untiled", "pluto", "pluto, no diamonds",
                      "pluto, second-level tiles", "pluto, no contraction recipe", "isl",
                      "cost model", "pluto, tiles 4", "pluto, tiles 8"]
    assert all(p.error is None and len(p.times) == 2 and p.compile_s > 0 for p in chosen)
    rows = results.rows(chosen)
    assert rows[0]["speedup"] == pytest.approx(1.0)
    assert rows[8]["options"] == {"scheduler": "pluto", "tile": True, "tile_size": 4}
    winner = results.best(chosen)
    assert winner.median == min(p.median for p in chosen)


def test_a_point_that_computes_something_else_is_never_chosen():
    found = target("matmul")
    found.reference = {name: value + 1 for name, value in found.reference.items()}
    chosen = tune(found, sizes=(), repeat=1, progress=False)
    assert all(p.error.startswith("wrong result: ") and not p.times for p in chosen)
    assert results.best(chosen) is None


def test_the_budget_stops_new_compiles_but_the_baseline_runs():
    chosen = tune(target("matmul"), sizes=(4,), budget=0.0, repeat=1, progress=False)
    assert chosen[0].error is None and chosen[0].times
    assert all(p.error == "not tried: the budget of 0 s was spent" for p in chosen[1:])


def test_a_random_search_draws_its_points_by_seed():
    found = target("matmul")
    first = [p.label for p in tune(found, search="random", count=3, seed=5, sizes=(4, 8),
                                   repeat=1, progress=False)]
    again = [p.label for p in tune(found, search="random", count=3, seed=5, sizes=(4, 8),
                                   repeat=1, progress=False)]
    assert first == again and len(first) == 3 and first[0] == BASELINE
    grid = [p.label for p in points(found, (4, 8))]
    assert set(first) <= set(grid)


def test_a_polybench_kernel_is_checked_against_its_loops_in_ieee_order():
    found = target("polybench:atax", size="MINI")
    assert found.kind == "polybench" and set(found.reference) >= {"y", "tmp"}
    chosen = tune(found, sizes=(8,), repeat=1, progress=False)
    assert [p.error for p in chosen] == [None] * len(chosen)


def test_the_command_writes_json_csv_best_and_plots(tmp_path, capsys):
    folder = tmp_path / "out"
    assert main(["tune", "matmul", "--param", "M=24", "--sizes", "4,8", "--repeat", "2",
                 "-o", str(folder)]) == 0
    shown = capsys.readouterr().out
    assert "matmul: 10 points, 2 interleaved rounds, 1 thread(s)" in shown
    data = json.loads((folder / "results.json").read_text())
    assert data["meta"]["details"]["params"]["M"] == 24
    assert [p["label"] for p in data["points"]][:2] == [BASELINE, "pluto, untiled"]
    with open(folder / "results.csv") as handle:
        table = list(csv.DictReader(handle))
    assert [row["label"] for row in table] == [p["label"] for p in data["points"]]
    best = json.loads((folder / "best.json").read_text())
    timed = [p for p in data["points"] if p["median_s"] is not None]
    assert best["median_s"] == min(p["median_s"] for p in timed)
    for plot in ("times.png", "sizes.png"):
        assert (folder / plot).read_bytes()[:4] == b"\x89PNG"


def test_the_command_keeps_an_existing_folder_and_names_bad_targets(tmp_path, capsys):
    folder = tmp_path / "kept"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert main(["tune", "matmul", "-o", str(folder)]) == 1
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert (folder / "notes.txt").read_text() == "mine"
    assert main(["tune", "jacobi-3d", "-o", str(tmp_path / "x")]) == 1
    assert "no loop-nest kernel 'jacobi-3d'" in capsys.readouterr().err
    assert main(["tune", "polybench:nope", "-o", str(tmp_path / "y")]) == 1
    assert "no PolyBench kernel 'nope'" in capsys.readouterr().err
    with pytest.raises(PolycError, match="dataset sizes are MINI"):
        target("polybench:gemm", size="HUGE")


def test_the_check_allows_fast_maths_rounding_only():
    found = target("matmul")
    outputs = {name: value.copy() for name, value in found.reference.items()}
    assert found.check(outputs) is None
    name = next(iter(outputs))
    outputs[name] = outputs[name] * np.float32(1.01)
    assert "differs from the reference" in found.check(outputs)


def test_inspect_finds_loop_nest_kernels_by_name(capsys):
    assert main(["inspect", "jacobi-2d", "--param", "N=40"]) == 0
    shown = capsys.readouterr().out
    assert "T(S1): (t, 2*t + i, 2*t + j)" in shown and "T = 4 and N = 40" in shown
    assert main(["inspect", "jacobi2d", "--scheduler", "original", "--no-tile"]) == 0
    assert "T(S1): (t, 0, i, j)" in capsys.readouterr().out
    assert main(["inspect", "no-such-kernel"]) == 1
    assert "no such artifact: no-such-kernel" in capsys.readouterr().err
