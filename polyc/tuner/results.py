"""A tuning run's results: a table on the terminal, JSON and CSV of every point, two
plots (every point's median time with its fastest and slowest call; time against tile
size per strategy), the best point's options as JSON (``best.json``: the options to
compile the target with, its median and speed-up) and its trace
(``best.trace.json``: ``polyc compile --trace-in``, ``polyc cc --trace-in``)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from polyc.runtime.output import replacing
from polyc.tuner import BASELINE, Point, best

FIELDS = ("label", "options", "compile_s", "median_s", "min_s", "max_s", "runs", "speedup",
          "error")


def rows(chosen: list[Point]) -> list[dict[str, Any]]:
    baseline = next((p.median for p in chosen if p.label == BASELINE), None)
    return [p.row(baseline) for p in chosen]


def table(chosen: list[Point]) -> str:
    width = max([len("point"), *(len(p.label) for p in chosen)]) + 2
    lines = [f"{'point':<{width}}{'compile s':>10}{'median ms':>11}{'min ms':>9}{'max ms':>9}"
             f"{'x original':>12}  note"]
    winner = best(chosen)
    for row in rows(chosen):
        ms = [f"{row[k] * 1e3:.3f}" if row[k] is not None else "-"
              for k in ("median_s", "min_s", "max_s")]
        compile_s = f"{row['compile_s']:.2f}" if row["compile_s"] is not None else "-"
        speedup = f"{row['speedup']:.2f}" if row["speedup"] is not None else "-"
        note = row["error"] or ("best" if winner is not None and row["label"] == winner.label
                                else "")
        lines.append(f"{row['label']:<{width}}{compile_s:>10}{ms[0]:>11}{ms[1]:>9}{ms[2]:>9}"
                     f"{speedup:>12}  {note}")
    return "\n".join(lines)


def write(folder: Path, chosen: list[Point], meta: dict[str, Any]) -> list[Path]:
    """results.json, results.csv, best.json and the plots (when matplotlib is there) in
    ``folder``: the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    found = rows(chosen)
    written = [folder / "results.json", folder / "results.csv"]
    _replace(written[0], json.dumps({"meta": meta, "points": found}, indent=1) + "\n")
    with replacing(written[1]) as temporary, open(temporary, "w", newline="") as handle:
        out = csv.DictWriter(handle, FIELDS)
        out.writeheader()
        for row in found:
            out.writerow({**row, "options": json.dumps(row["options"], sort_keys=True)})
    winner = best(chosen)
    if winner is not None:
        written.append(folder / "best.json")
        row = next(r for r in found if r["label"] == winner.label)
        _replace(written[-1], json.dumps({"target": meta.get("target"), "label": winner.label,
                                          "options": winner.options,
                                          "median_s": row["median_s"],
                                          "speedup": row["speedup"]}, indent=1) + "\n")
    if winner is not None and winner.trace is not None:
        written.append(folder / "best.trace.json")
        _replace(written[-1], json.dumps(winner.trace, indent=1) + "\n")
    written += plot(folder, found, meta)
    return written


def plot(folder: Path, found: list[dict[str, Any]], meta: dict[str, Any]) -> list[Path]:
    """times.png (each point's median, whiskers to its fastest and slowest call, the
    baseline dashed) and sizes.png (median against tile size, one line per strategy
    with sizes); nothing without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    timed = [r for r in found if r["median_s"] is not None]
    if not timed:
        return []
    written = []
    figure, axes = plt.subplots(figsize=(max(6.0, 0.6 * len(timed) + 2), 4))
    medians = [r["median_s"] * 1e3 for r in timed]
    low = [m - r["min_s"] * 1e3 for m, r in zip(medians, timed)]
    high = [r["max_s"] * 1e3 - m for m, r in zip(medians, timed)]
    axes.bar(range(len(timed)), medians, yerr=[low, high], capsize=3, color="#4c72b0")
    baseline = next((r["median_s"] for r in timed if r["label"] == BASELINE), None)
    if baseline is not None:
        axes.axhline(baseline * 1e3, linestyle="--", color="gray", label="original loops")
        axes.legend()
    axes.set_xticks(range(len(timed)), [r["label"] for r in timed], rotation=45, ha="right")
    axes.set_ylabel("median ms per call")
    axes.set_title(f"polyc tune {meta.get('target', '')}")
    figure.tight_layout()
    written.append(folder / "times.png")
    figure.savefig(written[-1], dpi=100)
    plt.close(figure)
    series: dict[str, list[tuple[int, float]]] = {}
    for r in timed:
        size = r["options"].get("tile_size")
        if isinstance(size, int):
            strategy = re.sub(r",? ?tiles \d+", "", r["label"]) or "tiled"
            series.setdefault(strategy, []).append((size, r["median_s"] * 1e3))
    if series:
        figure, axes = plt.subplots(figsize=(6, 4))
        for strategy, values in series.items():
            values.sort()
            axes.plot([v[0] for v in values], [v[1] for v in values], marker="o",
                      label=strategy)
        if baseline is not None:
            axes.axhline(baseline * 1e3, linestyle="--", color="gray", label="original loops")
        axes.set_xscale("log", base=2)
        axes.set_xlabel("tile size (every band member)")
        axes.set_ylabel("median ms per call")
        axes.set_title(f"polyc tune {meta.get('target', '')}: tile sizes")
        axes.legend()
        figure.tight_layout()
        written.append(folder / "sizes.png")
        figure.savefig(written[-1], dpi=100)
        plt.close(figure)
    return written


def _replace(path: Path, text: str) -> None:
    """``text`` as the whole of ``path`` (:func:`polyc.runtime.output.replacing`)."""
    with replacing(path) as temporary:
        temporary.write_text(text)
