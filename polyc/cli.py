"""The ``polyc`` command line: compile, run, inspect and benchmark ONNX models.

Every command takes either an ONNX model (``*.onnx``, compiled in process) or an
artifact written by ``polyc compile`` (any other path). Errors polyc raises on
purpose print as one ``polyc: error: ...`` line and exit 1; anything else is an
internal error (exit 2) whose traceback ``--debug`` shows.

Heavy modules (islpy, llvmlite, onnx) are imported only when an ONNX model is
compiled: running an artifact needs numpy alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from polyc import config, options
from polyc.errors import InputError, ModelError, PolycError
from polyc.options import MODEL, NEST, parse_dim, parse_sizes, positive_int
from polyc.runtime.output import check_target, replacing

SHOWN_VALUES = 6

EPILOG = """\
examples:
  polyc compile examples/mlp.onnx -o mlp.so
  polyc run mlp.so --input x=examples/mlp_input.npy
  polyc run examples/mlp.onnx --seed 1 -o outputs.npz
  polyc inspect examples/mlp.onnx --fuse max
  polyc inspect mlp.so
  polyc inspect --graph examples/mlp.onnx
  polyc bench examples/mlp.onnx --repeat 100
  polyc cc gemm.c -I polybench/utilities --emit-c
  polyc tune jacobi-2d --param T=50 --param N=800
  polyc ops

environment: POLYC_DEBUG=1..4 (stage times, IR, dependences, LLVM IR), POLYC_CC (linker),
POLYC_CACHE=0 (no compile cache), POLYC_CACHE_DIR (its folder, default ~/.cache/polyc),
POLYC_CACHE_SIZE (its bound, default 4G), OMP_NUM_THREADS (threads of parallel loops).
"""


# --- argument parsing -------------------------------------------------------------------


def add_compile_options(parser: argparse.ArgumentParser, kinds=(MODEL,)) -> None:
    """The compile options' flags (polyc.options), and the compile cache's and the
    progress line's."""
    group = parser.add_argument_group("compilation (ONNX models only)" if kinds == (MODEL,)
                                      else "compilation")
    options.add_arguments(group, kinds)
    group.add_argument("--quiet", action="store_true",
                       help="no progress line while a long compile runs (shown on a "
                       "terminal after a second; also POLYC_PROGRESS=0)")
    group.add_argument("--cache", action=argparse.BooleanOptionalAction, default=None,
                       help="read and write the compile cache (default: on unless "
                       "POLYC_CACHE=0; --no-cache compiles from scratch and stores nothing; "
                       "see 'polyc cache')")


def add_trace_options(parser) -> None:
    parser.add_argument("--trace-in", metavar="TRACE.json",
                        help="compile as the trace says (polyc.Trace: the schedule it "
                             "recorded, its steps and compile options; --threads overrides)")
    parser.add_argument("--trace-out", metavar="TRACE.json",
                        help="write the compile's trace, to replay it with --trace-in")


def add_input_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", metavar="NAME=FILE.npy", action="append", default=[],
                        help="input NAME read from a .npy file (repeatable)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the random normal inputs used when no --input is given "
                             "(default: 0); a symbolic dim of them is 1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polyc", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A polyhedral compiler for ONNX models (and C loop nests: polyc cc).")
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of any error")
    parser.add_argument("--debug", action="store_true", default=False,
                        help="show the traceback of any error")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name, handler, help_text, examples):
        sub = commands.add_parser(name, parents=[debug], help=help_text, description=help_text,
                                  epilog="examples:\n" + "".join(f"  {e}\n" for e in examples),
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.set_defaults(handler=handler)
        return sub

    sub = command("compile", compile_command, "compile an ONNX model to a shared library",
                  ["polyc compile examples/mlp.onnx -o mlp.so",
                   "polyc compile model.onnx -o model.so --fuse max --shape x=8,64 --check",
                   "polyc compile model.onnx -o model.so --threads 2"])
    sub.add_argument("model", metavar="MODEL.onnx")
    sub.add_argument("-o", "--output", metavar="OUT.so",
                     help="artifact to write (default: MODEL's name with .so, here)")
    add_compile_options(sub)
    sub.add_argument("--report", action="store_true", help="print the compilation report too")
    add_trace_options(sub)

    sub = command("run", run_command, "run a model or artifact once and show its outputs",
                  ["polyc run mlp.so --input x=examples/mlp_input.npy",
                   "polyc run examples/mlp.onnx --seed 3 -o out.npz"])
    sub.add_argument("target", metavar="ARTIFACT.so|MODEL.onnx")
    add_input_options(sub)
    sub.add_argument("-o", "--output", metavar="OUT.npz", help="save all outputs to an .npz")
    add_compile_options(sub)

    sub = command("inspect", inspect_command,
                  "show the compiled schedule of a model or a loop-nest kernel (jacobi-2d, "
                  "polybench:gemm), or the manifest of an artifact",
                  ["polyc inspect examples/mlp.onnx --scheduler isl", "polyc inspect mlp.so",
                   "polyc inspect jacobi-2d --param T=10 --param N=100",
                   "polyc inspect --graph model.onnx"])
    sub.add_argument("target", metavar="MODEL.onnx|ARTIFACT.so|KERNEL")
    sub.add_argument("--graph", action="store_true",
                     help="show the ONNX graph before and after clean-up and what each "
                          "clean-up pass did, instead of compiling (ONNX models only)")
    add_compile_options(sub, (MODEL, NEST))

    sub = command("bench", bench_command,
                  "median run time of polyc (and of onnxruntime for an ONNX model)",
                  ["polyc bench examples/mlp.onnx --repeat 200",
                   "polyc bench mlp.so --input x=examples/mlp_input.npy",
                   "polyc bench model.onnx --profile --json profile.json"])
    sub.add_argument("target", metavar="MODEL.onnx|ARTIFACT.so")
    add_input_options(sub)
    sub.add_argument("--repeat", type=int, default=50, metavar="N",
                     help="timed runs after one warm-up run (default: 50)")
    sub.add_argument("--json", metavar="FILE.json",
                     help="with --profile: also write the profile as JSON")
    add_compile_options(sub)

    sub = command("cache", cache_command,
                  "show or empty the compile cache (models compiled before load at once)",
                  ["polyc cache info", "polyc cache clear",
                   "POLYC_CACHE_DIR=/tmp/pc POLYC_CACHE_SIZE=1G polyc compile m.onnx"])
    sub.add_argument("action", choices=("info", "clear"),
                     help="info: the folder, its entries and size; clear: remove every entry")

    sub = command("cc", cc_command,
                  "compile the SCoP of a C source (the loops between #pragma scop and "
                  "#pragma endscop, as Pluto's polycc reads them) and show it",
                  ["polyc cc gemm.c -I polybench/utilities -D MINI_DATASET --emit-c",
                   "polyc cc gemm.c -I polybench/utilities -o gemm_kernel.o",
                   "polyc cc kernel.c --function kernel --param n=1000 --inspect",
                   "polyc cc gemm.c -I polybench/utilities --scheduler original --no-tile"])
    sub.add_argument("source", metavar="KERNEL.c")
    sub.add_argument("-D", dest="defines", metavar="NAME[=VALUE]", action="append",
                     default=[], help="a macro for the C preprocessor (repeatable)")
    sub.add_argument("-I", dest="includes", metavar="DIR", action="append", default=[],
                     help="a folder of headers for the C preprocessor (repeatable)")
    sub.add_argument("--function", metavar="NAME",
                     help="the kernel's function (default: the one with #pragma scop; a "
                          "function without the pragmas is compiled whole)")
    sub.add_argument("-o", "--output", metavar="OUT.so|OUT.o",
                     help="write the kernel's function with its C signature (polyc's code "
                          "for these parameter values, the original loops for others): a "
                          "shared library, or an object file to link in place of the "
                          "original")
    add_trace_options(sub)
    shown = sub.add_mutually_exclusive_group()
    shown.add_argument("--emit-c", action="store_true",
                       help="print the transformed loops as C (isl's printer; each "
                            "statement a macro of its C text)")
    shown.add_argument("--inspect", action="store_true",
                       help="print the SCoP, dependences, schedule and loops")
    group = sub.add_argument_group("compilation (the defaults of loop nests, but 1 thread; "
                                   "--autoselect model unless --scheduler or --tile is given)")
    options.add_arguments(group, (NEST,), skip=("symbolic",))

    sub = command("tune", tune_command,
                  "sweep schedules, tiling strategies and tile sizes; time them interleaved "
                  "and keep the fastest correct one",
                  ["polyc tune jacobi-2d --param T=50 --param N=800",
                   "polyc tune polybench:gemm --size MEDIUM --sizes 32,64,128",
                   "polyc tune model.onnx --search random --points 5 --budget 120"])
    sub.add_argument("target", metavar="KERNEL|polybench:KERNEL|MODEL.onnx",
                     help="a loop-nest kernel (jacobi-2d, 2mm, ...: polyc.scop.polybench), a "
                          "PolyBench/C kernel (polybench:gemm) or an ONNX model")
    sub.add_argument("--param", metavar="NAME=N", type=parse_dim, action="append",
                     default=[], help="a kernel parameter's value (repeatable)")
    sub.add_argument("--size", choices=("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE"),
                     default="MEDIUM", help="PolyBench dataset (default MEDIUM)")
    sub.add_argument("--sizes", type=parse_sizes, metavar="N,N,...",
                     help="tile sizes to try (default 16,32,64,128)")
    sub.add_argument("--search", choices=("grid", "random"), default="grid",
                     help="every point (grid, default) or --points of them drawn at random")
    sub.add_argument("--points", type=positive_int, metavar="N",
                     help="how many points (the original loops included)")
    sub.add_argument("--seed", type=int, default=0,
                     help="seed of the inputs and of the random search (default 0)")
    sub.add_argument("--budget", type=float, metavar="SECONDS",
                     help="stop starting compiles after this many seconds")
    sub.add_argument("--repeat", type=positive_int, default=5, metavar="N",
                     help="interleaved timing rounds (default 5)")
    sub.add_argument("--threads", type=positive_int, default=1, metavar="N",
                     help="threads of parallel loops (default 1)")
    sub.add_argument("-o", "--output", metavar="DIR",
                     help="folder for results.json, results.csv, best.json, best.trace.json "
                          "and the plots "
                          "(default tune-<target>; an existing one is not overwritten)")

    sub = command("ops", ops_command, "list the ONNX ops polyc lowers, with their versions",
                  ["polyc ops", "polyc ops Conv"])
    sub.add_argument("names", nargs="*", metavar="OP", help="only these ops")
    return parser


# --- opening models, reading inputs -----------------------------------------------------


def is_onnx(path: str) -> bool:
    return Path(path).suffix.lower() == ".onnx"


def compile_options(args) -> dict:
    """The options given on the command line (polyc.options), and --cache, so that the
    pipeline's defaults apply to the rest."""
    cache = {"cache": args.cache} if getattr(args, "cache", None) is not None else {}
    return {**options.given(args), **cache}


def compile_onnx(path: str, args, *, load: bool = True):
    """The ONNX model ``path`` compiled (or read from the compile cache), loaded unless
    ``load`` is False."""
    if not Path(path).is_file():
        raise ModelError(f"no such model file: {path}")
    from polyc.pipeline import build  # heavy: islpy, llvmlite, onnx
    compiled = build(path, **compile_options(args))
    return compiled.loaded() if load else compiled


def open_target(args):
    """A compiled ONNX model (JIT) or a loaded artifact, by the target's suffix."""
    if is_onnx(args.target):
        return compile_onnx(args.target, args)
    from polyc.runtime.artifact import load_artifact
    return load_artifact(args.target)


def read_inputs(model, args) -> dict[str, np.ndarray]:
    """``--input NAME=FILE.npy`` arrays, or seeded random ones for every input if none."""
    if not args.input:
        rng = np.random.default_rng(args.seed)
        shape = lambda spec: [1 if isinstance(d, str) else d for d in spec.shape]  # noqa: E731
        return {spec.name: rng.standard_normal(shape(spec)).astype(spec.dtype)
                for spec in model.inputs}
    inputs = {}
    for item in args.input:
        name, sep, file = item.partition("=")
        if not sep:
            name, file = sole_input_name(model, item), item
        inputs[name] = load_npy(name, file)
    return inputs


def input_files(args) -> list[str]:
    """The files of the ``--input`` options."""
    return [item.partition("=")[2] or item for item in args.input or ()]


def sole_input_name(model, item: str) -> str:
    if len(model.inputs) != 1:
        names = ", ".join(spec.name for spec in model.inputs)
        raise InputError(f"--input {item}: write NAME=FILE.npy (this model takes {names})")
    return model.inputs[0].name


def load_npy(name: str, file: str) -> np.ndarray:
    if not Path(file).is_file():
        raise InputError(f"no such input file for '{name}': {file}")
    try:
        array = np.load(file, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read input '{name}' from {file}: {error}") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"input file {file} holds several arrays; give one .npy per input")
    return array


# --- commands ---------------------------------------------------------------------------


def compile_command(args) -> None:
    output = Path(args.output) if args.output else Path(Path(args.model).stem + ".so")
    check_target(output, reads=[args.model])  # before compiling
    trace_out = _trace_target(args, reads=[args.model, output])
    clock = time.perf_counter()
    if args.trace_in:
        if not Path(args.model).is_file():
            raise ModelError(f"no such model file: {args.model}")
        compiled = _traced(args, args.model)
    else:
        compiled = compile_onnx(args.model, args, load=False)
    compiled.save(output)
    _write_trace(trace_out, compiled)
    cached = " (from the compile cache)" if compiled.cached else ""
    print(f"wrote {output} in {time.perf_counter() - clock:.2f} s{cached}")
    if args.report:
        print(compiled.report())


def _trace_target(args, reads) -> Path | None:
    """``--trace-out``'s path, checked before compiling (not an input, not the
    artifact)."""
    if not getattr(args, "trace_out", None):
        return None
    path = Path(args.trace_out)
    check_target(path, reads=[*reads, *([args.trace_in] if args.trace_in else [])])
    return path


def _traced(args, nest, trace=None):
    """``nest`` compiled as ``--trace-in`` says (``trace``, when loaded already);
    ``--threads`` overrides its threads."""
    from polyc.trace import Trace
    overrides = {"threads": args.threads} if args.threads is not None else {}
    return (trace or Trace.load(args.trace_in)).compiled(nest, **overrides)


def _write_trace(path: Path | None, compiled) -> None:
    if path is None:
        return
    from polyc.trace import trace_of
    trace_of(compiled.compilation).save(path)
    print(f"wrote {path} (the compile's trace)")


def run_command(args) -> None:
    if args.output:
        check_target(args.output, reads=[args.target, *input_files(args)])
    model = open_target(args)
    outputs = model.run(read_inputs(model, args))
    if args.output:
        with replacing(args.output, reads=[args.target, *input_files(args)]) as partial, \
                open(partial, "wb") as file:
            np.savez(file, **outputs)  # (a file: savez adds no .npz to the path)
        print(f"wrote {args.output} ({', '.join(outputs)})")
        return
    for name, array in outputs.items():
        print(describe(name, array))


def describe(name: str, array: np.ndarray) -> str:
    """``y: float32[4, 10] = [0.0123, ...]``: an output's name, shape, dtype, first values."""
    flat = array.reshape(-1)
    values = ", ".join(f"{v:.6g}" for v in flat[:SHOWN_VALUES].tolist())
    more = ", ..." if flat.size > SHOWN_VALUES else ""
    return f"{name}: {array.dtype}[{', '.join(map(str, array.shape))}] = [{values}{more}]"


def inspect_command(args) -> None:
    if args.graph:
        print(cleanup_text(args))
        return
    if is_onnx(args.target):
        print(compile_onnx(args.target, args).inspect())
        return
    if not Path(args.target).exists() and _kernel_name(args.target):
        print(compile_kernel(args).inspect())
        return
    from polyc.runtime.artifact import load_artifact
    print(manifest_json(load_artifact(args.target).manifest))


def _kernel_name(target: str) -> bool:
    """Whether ``target`` names a loop-nest kernel (``jacobi-2d``) or a PolyBench/C one
    (``polybench:gemm``) rather than a file."""
    if target.startswith("polybench:"):
        return True
    from polyc.scop.polybench import KERNELS
    try:
        KERNELS[target]
    except KeyError:
        return False
    return True


def compile_kernel(args):
    """The kernel named by ``args.target`` compiled with the command's options at its
    parameters (``--param``; a loop-nest kernel's small defaults, a PolyBench kernel's
    MEDIUM dataset)."""
    from polyc.tuner.targets import kernel_compiler
    chosen = options.given(args)
    params, threads = chosen.pop("params", None), chosen.pop("threads", 1)
    *_, build = kernel_compiler(args.target, params=params, threads=threads)
    return build(chosen)


def cleanup_text(args) -> str:
    """The ONNX graph as loaded, the clean-up notes, and the graph after clean-up."""
    if not is_onnx(args.target):
        raise InputError(f"--graph shows an ONNX model's graph; {args.target} is not a "
                         "*.onnx file")
    if not Path(args.target).is_file():
        raise ModelError(f"no such model file: {args.target}")
    from polyc.frontend.cleanup import cleanup, describe  # heavy: onnx
    from polyc.frontend.load import load_model
    chosen = options.given(args)
    loaded = load_model(args.target, shapes=chosen.get("shapes"), dims=chosen.get("dims"),
                        symbolic=chosen.get("symbolic"))
    cleaned = cleanup(loaded)
    sections = [("ONNX GRAPH", describe(loaded)),
                ("CLEAN-UP", "\n".join(cleaned.notes) or "nothing changed"),
                ("CLEANED ONNX GRAPH", describe(cleaned))]
    return "\n\n".join(f"== {title} ==\n{body}" for title, body in sections)


def cc_command(args) -> None:
    """Compile a C kernel's SCoP; print what it is and the schedule's decisions, its
    loops as C (--emit-c), or the whole inspection (--inspect)."""
    from polyc.scop.c import from_c  # heavy: islpy, pycparser
    if not Path(args.source).is_file():
        raise InputError(f"no such C source: {args.source}")
    kernel = from_c(Path(args.source), function=args.function, defines=args.defines,
                    include=args.includes)
    chosen = {"threads": 1, **options.given(args)}
    params = chosen.pop("params", None)
    if args.output:
        check_target(args.output, reads=[args.source])  # before compiling
    trace_out = _trace_target(args, reads=[args.source, *filter(None, [args.output])])
    clock = time.perf_counter()
    if args.trace_in:
        from polyc.trace import Trace
        trace = Trace.load(args.trace_in)
        values = kernel.values(trace.start.get("params"))
        compiled = _traced(args, kernel, trace)
    else:
        values = kernel.values(params)
        compiled = kernel.compile(params=values, **chosen)
    _write_trace(trace_out, compiled)
    if args.output:
        from polyc.runtime.c_library import write_c_library
        path = write_c_library(kernel, compiled.native, values, args.output,
                               reads=[args.source])
        print(f"wrote {path} ({kernel.name}, parameters "
              f"{', '.join(f'{k}={v}' for k, v in values.items())}"
              f") in {time.perf_counter() - clock:.2f} s")
        return
    if args.emit_c:
        from polyc.codegen.c_text import c_text
        scalars = {name for name, (_, shape) in kernel.arrays.items() if shape == ()}
        notes = [f"{a.tensor} expanded by polyc: {a.name}[{']['.join(map(str, a.shape))}], "
                 "an element per iteration of the loops around it"
                 for a in compiled.compilation.scop.arrays
                 if a.tensor in scalars and a.shape != ()]
        print(c_text(compiled.compilation.program, kernel.macros(), notes), end="")
        return
    if args.inspect:
        print(compiled.inspect())
        return
    print(f"{kernel.name} in {kernel.file}: {len(kernel.statements)} statements, "
          f"parameters {', '.join(f'{k}={v}' for k, v in values.items()) or 'none'}")
    for s in kernel.statements:
        print(f"  {s.name}: {s.text}    {s.domain}")
    print("schedule:")
    for decision in compiled.schedule.decisions:
        print(f"  {decision}")


def tune_command(args) -> None:
    from polyc import __version__
    from polyc.codegen.target import host_cpu
    from polyc.tuner import results, tune
    from polyc.tuner.targets import target as tuning_target
    name = Path(args.target).stem if is_onnx(args.target) else args.target.replace(":", "-")
    folder = Path(args.output or f"tune-{name}")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise PolycError(f"{folder} exists and is not an empty folder: choose another "
                         "with -o, or remove it")
    sizes = args.sizes if isinstance(args.sizes, tuple) else (
        (args.sizes,) if args.sizes else None)
    found = tuning_target(args.target, params=dict(args.param) or None, size=args.size,
                          threads=args.threads, seed=args.seed)
    chosen = tune(found, sizes=sizes, search=args.search, count=args.points, seed=args.seed,
                  budget=args.budget, repeat=args.repeat)
    print(f"{found.name}: {len(chosen)} points, {args.repeat} interleaved rounds, "
          f"{args.threads} thread(s)")
    print(results.table(chosen))
    meta = {"target": args.target, "details": found.details, "search": args.search,
            "repeat": args.repeat, "threads": args.threads, "seed": args.seed,
            "cpu": host_cpu()[0], "version": __version__,
            "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    written = results.write(folder, chosen, meta)
    print("wrote " + ", ".join(str(p) for p in written))


def ops_command(args) -> None:
    """One line per op: its name and the since-versions polyc lowers."""
    import onnx

    from polyc.frontend.cleanup.host_ops import HOST_OPS
    from polyc.frontend.functions import defined_by_function
    from polyc.frontend.ops import OPS
    from polyc.frontend.ops.registry import CONTRIB, CONTRIB_DOMAIN

    versions: dict[str, list[int]] = {}
    for op_type, version in OPS:
        versions.setdefault(op_type, []).append(version)
    unknown = [name for name in args.names if name not in versions]
    if unknown:
        raise PolycError(f"polyc lowers no op named {', '.join(unknown)} ('polyc ops' lists "
                         "those it lowers)")
    names = args.names or sorted(versions)
    for name in names:
        print(f"{name:<24} {', '.join(map(str, sorted(versions[name])))}")
    if not args.names:
        print(f"{len(names)} ops")
        latest = onnx.defs.onnx_opset_version()
        bodies = sorted(s.name for s in onnx.defs.get_all_schemas() if s.domain == ""
                        and s.name not in versions and defined_by_function(s.name, latest))
        print(f"and {len(bodies)} ops that ONNX defines by a function body, compiled as "
              f"that body when polyc lowers every op in it: {', '.join(bodies)}")
        print(f"and onnxruntime's {CONTRIB_DOMAIN} ops its quantizer writes: "
              f"{', '.join(sorted(CONTRIB))}")
        print("and ops the runtime runs after the compiled code when only the graph's "
              "outputs take theirs (their length depends on the values): " + ", ".join(
                  f"{op} {', '.join(map(str, v))}" for op, (v, _) in sorted(HOST_OPS.items())))


def cache_command(args) -> None:
    from polyc.cache import open_cache

    cache = open_cache(True)
    if args.action == "clear":
        count = cache.clear()
        print(f"removed {count} entr{'y' if count == 1 else 'ies'} from {cache.root}")
    else:
        print(cache.info())
        if not config.cache_enabled():
            print("  off in this environment (POLYC_CACHE=0): compiles neither read nor "
                  "write it")


def manifest_json(manifest: dict) -> str:
    """The manifest as JSON, one top-level key a line (shapes stay on one line)."""
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}" for key, value in manifest.items()]
    return "{\n" + ",\n".join(lines) + "\n}"


def bench_command(args) -> None:
    if args.repeat < 1:
        raise InputError(f"--repeat must be at least 1, got {args.repeat}")
    if args.json and not args.profile:
        raise InputError("--json writes the profile: give --profile too")
    model = open_target(args)
    inputs = read_inputs(model, args)
    if args.profile:
        profile_command(model, inputs, args)
        return
    ours = median_seconds(lambda: model.run(inputs), args.repeat)
    print(f"polyc        {ours * 1e3:10.4f} ms  (median of {args.repeat})")
    if not is_onnx(args.target):
        return
    try:
        theirs = onnxruntime_seconds(args.target, inputs, args.repeat, args.threads)
    except Exception as error:  # noqa: BLE001 - a comparison, not polyc's own failure
        print(f"onnxruntime  failed: {type(error).__name__}: {one_line(error)}")
        return
    if theirs is None:
        print("onnxruntime  not installed")
        return
    print(f"onnxruntime  {theirs * 1e3:10.4f} ms  (median of {args.repeat})")
    print(f"speedup      {theirs / ours:10.2f} x  (onnxruntime time / polyc time)")


def profile_command(model, inputs: dict, args) -> None:
    """The per-nest table of ``model`` (compiled with timers), next to onnxruntime's own
    profile of the same nodes for an ONNX model (when onnxruntime is installed)."""
    profile = model.profile(inputs, args.repeat)
    print(profile)
    if args.json:
        write_json(args.json, profile.as_dict(), args.target)


def write_json(path: str, data: dict, model: str) -> None:
    with replacing(path, reads=[model]) as partial:
        partial.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {path}")


def median_seconds(run, repeat: int) -> float:
    run()  # warm-up: first-touch of pages, lazy binding
    times = []
    for _ in range(repeat):
        clock = time.perf_counter()
        run()
        times.append(time.perf_counter() - clock)
    return statistics.median(times)


def onnxruntime_seconds(path: str, inputs: dict, repeat: int, threads: int | None
                        ) -> float | None:
    """onnxruntime's median time on ``threads`` threads (its default when None): polyc
    compiled with ``--threads 1`` had been timed against onnxruntime on both cores."""
    try:
        import onnxruntime
    except ImportError:
        return None
    options = onnxruntime.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return median_seconds(lambda: session.run(None, inputs), repeat)


# --- entry point ------------------------------------------------------------------------


def one_line(error: BaseException) -> str:
    return " | ".join(line.strip() for line in str(error).splitlines() if line.strip())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "quiet", False):
        from polyc import progress
        progress.quiet()
    try:
        args.handler(args)
    except BrokenPipeError:  # e.g. `polyc inspect m.so | head`: the reader left, stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except PolycError as error:
        if args.debug:
            raise
        print(f"polyc: error: {one_line(error)}", file=sys.stderr)
        return 1
    except Exception as error:  # the CLI's last line of defence
        if args.debug:
            raise
        print(f"polyc: internal error: {type(error).__name__}: {one_line(error)} "
              "(rerun with --debug for a traceback)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
