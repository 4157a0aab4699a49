"""Compile options: one list, from the command line down.

Every option is a field of :class:`Options` and says there, once, everything about
itself: its default (per kind of input when they differ: ONNX models or loop nests),
which stages read it (:data:`START`, the stages up to the scheduler's, which a steered
:class:`polyc.Schedule` runs first; :data:`REST`, those after), its help text, its
command-line flag and how a value given there or in Python is checked and put in
normal form. From that list come

- the keyword options of every entry point (:func:`polyc.compile`, ``LoopNest.compile``,
  a C kernel's ``compile``, ``polyc.Schedule`` and its ``compile``), checked by
  :meth:`Options.of` (a misspelled one names the nearest),
- the flags of ``polyc compile/run/inspect/bench/cc`` (:func:`add_arguments`,
  :func:`given`),
- what a trace records (:func:`recorded`),
- the manifest's and the compile cache's record of them (:meth:`Options.as_dict`),
- and the docstrings' list of them (:func:`describe`).

Adding an option is adding a field here and reading it in its stage.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from polyc.config import parse_size as bytes_of
from polyc.errors import PolycError
from polyc.strategies import STRATEGIES
from polyc.strategies import checked as checked_strategies

MODEL, NEST = "model", "nest"  # the kinds of input: ONNX models, loop nests (and C kernels)
START, REST = "start", "rest"  # the stages up to the scheduler's, and those after
KINDS = {MODEL: "ONNX models", NEST: "loop nests"}
WINOGRAD_CHOICES = ("2x2", "4x4", "off")
DEFAULT_WINOGRAD = "2x2"
FUSE_POLICIES = ("smart", "none", "max", "smartfuse", "nofuse", "maxfuse")
AUTOSELECT_CHOICES = (None, "model", "measure")
CACHE_LEVELS = ("l1", "l2", "l3")
VECTOR_WIDTHS = (128, 256, 512)  # SSE, AVX(2), AVX-512F


@dataclass(frozen=True)
class Flag:
    """An option's command-line flag: ``toggle`` (``--x/--no-x``), ``value`` (one,
    parsed by ``parse``), ``switch`` (``--x`` sets True) or ``many`` (repeatable; the
    parsed values are ``gather``-ed into the option's value)."""

    form: str
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    choices: tuple | None = None
    name: str | None = None  # the flag, when not the option's name with dashes
    gather: Callable[[list, str], Any] | None = None

    def flag(self, option: str) -> str:
        """The flag of ``option`` (its name with dashes unless :attr:`name`)."""
        return self.name or "--" + option.replace("_", "-")


def option(default, stage: str, help: str, *, kinds: tuple[str, ...] = (MODEL, NEST),  # noqa: A002
           by_kind: Mapping[str, Any] | None = None, flag: Flag | None = None,
           normal: Callable[[Any], Any] | None = None):
    """A field of :class:`Options` with what the rest of polyc needs to know of it."""
    return field(default=default, metadata={
        "stage": stage, "help": help, "kinds": kinds, "by_kind": dict(by_kind or {}),
        "flag": flag, "normal": normal})


# --- command-line values ----------------------------------------------------------------


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``x=1,3,224,224`` -> ``("x", (1, 3, 224, 224))``."""
    name, sep, dims = text.partition("=")
    try:
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        shape = None
    if not sep or not name or shape is None or any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"expected NAME=D0,D1,... (e.g. x=4,64), got {text!r}")
    return name, shape


def parse_names(text: str) -> list[str]:
    """``batch,seq`` -> ``["batch", "seq"]``."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected NAME[,NAME...], got {text!r}")
    return names


def parse_dim(text: str) -> tuple[str, int]:
    """``batch=8`` -> ``("batch", 8)``."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=N with N >= 1 (e.g. batch=8), "
                                         f"got {text!r}")
    return name, int(value)


def parse_size(text: str) -> int:
    """``"64G"`` -> bytes (units K, M, G, T of 1024; a plain number is bytes)."""
    try:
        return bytes_of(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 64G, "
                                         f"got {text!r}") from None


def parse_sizes(text: str) -> int | tuple[int, ...]:
    """``N`` (every loop) or ``N,N,..`` (one per loop of the band)."""
    parts = [positive_int(part) for part in text.split(",")]
    return parts[0] if len(parts) == 1 else tuple(parts)


def parse_blocking(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if len(parts) != 5:
        raise argparse.ArgumentTypeError(f"expected MR,NR,MC,NC,KC (five integers), got {text!r}")
    return tuple(positive_int(part) for part in parts)


def parse_caches(text: str) -> dict[str, int]:
    """``l2=256K,l3=8M`` -> ``{"l2": 262144, "l3": 8388608}``."""
    found = {}
    for item in text.split(","):
        level, sep, size = item.partition("=")
        if not sep or level.strip().lower() not in CACHE_LEVELS:
            raise argparse.ArgumentTypeError(f"expected LEVEL=SIZE[,...] with levels "
                                             f"{', '.join(CACHE_LEVELS)}, got {text!r}")
        found[level.strip().lower()] = parse_size(size.strip())
    return found


def parse_tile2(text: str) -> bool | int:
    """``off``, ``on`` or a number of first-level tiles (2 or more)."""
    if text in ("off", "on"):
        return text == "on"
    try:
        return checked_tile2(positive_int(text))
    except (argparse.ArgumentTypeError, PolycError):
        raise argparse.ArgumentTypeError(f"expected off, on or an integer >= 2, "
                                         f"got {text!r}") from None


def maybe_named(parse):
    """An option value ``VALUE`` or ``NAME=VALUE`` (a statement or ONNX node name)."""
    def parse_one(text: str):
        name, sep, value = text.rpartition("=")
        return (name, parse(value)) if sep else (None, parse(value))
    return parse_one


def one_or_named(values: list, flag: str):
    """The repeated ``flag`` values: one bare value, or a mapping of named ones."""
    bare = [v for name, v in values if name is None]
    if bare and len(values) > 1:
        raise PolycError(f"{flag}: give one value for every loop nest, or NAME=VALUE "
                         "(repeatable) for some statements, not both")
    return bare[0] if bare else dict(values)


def flattened(values: list, flag: str) -> list:
    return [v for names in values for v in names]


def as_mapping(values: list, flag: str) -> dict:
    return dict(values)


# --- normal forms (Python values, and JSON's read back) ----------------------------------


def _names(value) -> tuple[str, ...] | None:
    """Dim names as a tuple (a single name is accepted), or None for none."""
    if not value:
        return None
    names = (value,) if isinstance(value, str) else tuple(value)
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise PolycError(f"symbolic takes dim names (strings), got {bad[0]!r}")
    return names


def _shapes(value) -> dict[str, tuple[int, ...]] | None:
    return {str(k): tuple(v) for k, v in value.items()} if value else None


def _mapping(value) -> dict | None:
    return dict(value) if value else None


def _sizes(value):
    """A tile size as the tiling stage checks it: a tuple for a sequence, a dict of
    those for a mapping (lists from JSON become tuples)."""
    if isinstance(value, Mapping):
        return {k: _sizes(v) for k, v in value.items()}
    return tuple(value) if isinstance(value, list) else value


def _blocking(value):
    """``(mr, nr, mc, nc, kc)`` from a :class:`~polyc.tiling.microkernel.Blocking` or a
    sequence (the tiling stage checks it), or a dict of those."""
    if isinstance(value, Mapping):
        return {k: _blocking(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value):
        return dataclasses.astuple(value)
    return tuple(value) if isinstance(value, list) else value


def _positive_or_none(what: str, unit: str, none: str):
    """A check that a value is a positive int, or None (meaning ``none``)."""
    def checked(value):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise PolycError(f"{what} must be a positive {unit} or None ({none}), "
                             f"got {value!r}")
        return value
    return checked


_threads = _positive_or_none("threads", "int", "OMP_NUM_THREADS")
_memory_limit = _positive_or_none("memory_limit", "number of bytes", "this machine's memory")


def _winograd(value):
    if value not in WINOGRAD_CHOICES:
        raise PolycError(f"winograd must be one of {', '.join(WINOGRAD_CHOICES)}, "
                         f"got {value!r}")
    return value


def _autoselect(value):
    value = None if value == "off" else value
    if value not in AUTOSELECT_CHOICES:
        raise PolycError(f"autoselect must be one of "
                         f"{', '.join(map(str, AUTOSELECT_CHOICES))}, got {value!r}")
    return value


def checked_vector_bits(value) -> int | None:
    """``value`` if it is None or one of :data:`VECTOR_WIDTHS`; else :class:`PolycError`."""
    if value is None or (not isinstance(value, bool) and value in VECTOR_WIDTHS):
        return value
    raise PolycError(f"vector_bits must be one of {', '.join(map(str, VECTOR_WIDTHS))} (SSE, "
                     f"AVX2, AVX-512) or None (the host's), got {value!r}")


def checked_tile2(value) -> bool | int:
    """``value`` if it is a valid value of ``tile2`` (:mod:`polyc.tiling.levels`); else
    :class:`PolycError`."""
    if isinstance(value, bool) or (isinstance(value, int) and value >= 2):
        return value
    raise PolycError(f"tile2 must be False (one level of tiles), True (a second level "
                     f"sized from the host's caches) or an int >= 2 (first-level tiles per "
                     f"member of a second-level tile), got {value!r}")


def _caches(value) -> dict[str, int] | None:
    """Cache sizes by level (``{"l2": 262144}``); levels not given are the host's."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise PolycError(f"caches must be a mapping from levels ({', '.join(CACHE_LEVELS)}) "
                         f"to bytes, got {value!r}")
    found = {}
    for level, size in value.items():
        if level not in CACHE_LEVELS or isinstance(size, bool) or not isinstance(size, int) \
                or size < 1:
            raise PolycError(f"caches: {level!r}: {size!r} is not a cache level "
                             f"({', '.join(CACHE_LEVELS)}) and a positive number of bytes")
        found[level] = size
    return found


# --- the options ------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """What the user chose, checked and in normal form; part of the artifact's
    manifest. Build one with :meth:`of` (the defaults of a kind of input, unknown
    names refused); see the module's docstring."""

    scheduler: str = option(
        "pluto", START, "the affine scheduler: 'pluto' (polyc's Pluto-style scheduler, the "
        "default), 'isl' (isl's own) or 'original' (the order of the source)",
        flag=Flag("value", metavar="NAME"))
    fuse: str = option(
        "smart", START, "the fusion policy: smart (the default), none or max; Pluto's "
        "names smartfuse, nofuse and maxfuse are accepted too",
        flag=Flag("value", metavar="POLICY", choices=FUSE_POLICIES))
    check: bool = option(
        True, REST, "check every schedule's legality while compiling (default: on)",
        flag=Flag("toggle"), normal=bool)
    fast_math: bool = option(
        True, REST, "allow float reassociation and FMA contraction (default: on; off "
        "keeps IEEE order)", flag=Flag("toggle"), normal=bool)
    tile: bool = option(
        True, REST, "tile permutable loop bands, and order their loops for vectors "
        "(default: on; off keeps the scheduler's loops)", flag=Flag("toggle"), normal=bool)
    tile_size: Any = option(
        None, REST, "tile size of every tiled loop, or one per loop of the band "
        "(default: from the host's cache sizes); NAME=... (repeatable) sets it for the "
        "bands of one statement or ONNX node only (polyc.tiling.overrides)",
        flag=Flag("many", maybe_named(parse_sizes), "[NAME=]N[,N..]", gather=one_or_named),
        normal=_sizes)
    blocking: Any = option(
        None, REST, "register tile MR x NR and cache blocks MC x NC x KC of every "
        "contraction (MatMul, Gemm, convolutions), or NAME=... of one; NR a multiple of 8 "
        "(default: from the shape and the host's cache sizes)",
        flag=Flag("many", maybe_named(parse_blocking), "[NAME=]MR,NR,MC,NC,KC",
                  gather=one_or_named), normal=_blocking)
    shapes: Mapping[str, tuple[int, ...]] | None = option(
        None, START, "fix the whole shape of input NAME (repeatable)", kinds=(MODEL,),
        flag=Flag("many", parse_shape, "NAME=D0,D1,...", name="--shape", gather=as_mapping),
        normal=_shapes)
    dims: Mapping[str, int] | None = option(
        None, START, "fix the dynamic dim NAME (e.g. batch) to N in every input and output "
        "that has it (repeatable)", kinds=(MODEL,),
        flag=Flag("many", parse_dim, "NAME=N", name="--dim", gather=as_mapping),
        normal=_mapping)
    params: Mapping[str, int] | None = option(
        None, START, "the value of the parameter NAME of a loop nest (repeatable; a C "
        "kernel's default: the value a call in its file passes)", kinds=(NEST,),
        flag=Flag("many", parse_dim, "NAME=N", name="--param", gather=as_mapping),
        normal=_mapping)
    symbolic: tuple[str, ...] | None = option(
        None, START, "keep the dim or parameter NAME symbolic: one artifact for every "
        "value, read from the array shapes at each call (repeatable)",
        flag=Flag("many", parse_names, "NAME[,NAME...]", gather=flattened), normal=_names)
    threads: int | None = option(
        None, REST, "threads of parallel loops (default: OMP_NUM_THREADS when the code "
        "runs; 1: serial code, no OpenMP regions)",
        flag=Flag("value", positive_int, "N"), normal=_threads)
    profile: bool = option(
        False, REST, "compile timers around each loop nest into the code (read by 'polyc "
        "bench --profile' or the Python API's profile())", flag=Flag("switch"), normal=bool)
    winograd: str = option(
        DEFAULT_WINOGRAD, START, "3x3 stride-1 convs over 64+ channels: Winograd F(2x2, "
        "3x3) (the default), F(4x4, 3x3) (faster, a few times the rounding error of a "
        "direct conv) or off (direct)", kinds=(MODEL,),
        flag=Flag("value", choices=WINOGRAD_CHOICES), normal=_winograd)
    memory_limit: int | None = option(
        None, REST, "the most memory one call may need, inputs, outputs, weights and "
        "scratch (512M, 64G; default: this machine's memory)",
        flag=Flag("value", parse_size, "SIZE"), normal=_memory_limit)
    autoselect: str | None = option(
        None, REST, "how a loop nest's schedule is chosen: off (the scheduler's, tiled "
        "as --tile says; a C kernel's default unless --scheduler or --tile is given: "
        "model), model (the cheapest of Pluto's and the original order, tiled and not, "
        "by polyc.scheduler.cost) or measure (isl's too; each run on seeded inputs, the "
        "fastest kept)", kinds=(NEST,),
        flag=Flag("value", choices=("model", "measure", "off")), normal=_autoselect)
    split: bool = option(
        True, START, "split a statement at the iteration through which its innermost loop "
        "carries a dependence, where that makes the loop parallel (default: on for loop "
        "nests, off for models)", by_kind={MODEL: False}, flag=Flag("toggle"), normal=bool)
    expand: bool = option(
        True, START, "expand scalars set in each iteration of loops into arrays over "
        "those loops (default: on for loop nests, off for models)", by_kind={MODEL: False},
        flag=Flag("toggle"), normal=bool)
    parallel_hints: bool = option(
        True, REST, "tell LLVM which innermost loops carry nothing "
        "(llvm.loop.parallel_accesses; default: on for loop nests, off for models)",
        by_kind={MODEL: False}, flag=Flag("toggle"), normal=bool)
    without: tuple[str, ...] = option(
        (), REST, f"leave these strategies out ({', '.join(STRATEGIES)}; all on by "
        "default)", flag=Flag("value", parse_names, "STRATEGY[,...]"),
        normal=checked_strategies)
    tile2: bool | int = option(
        False, REST, "second-level tiles around the tiles of rectangularly tiled bands "
        "(polyc.tiling.levels): off (the default), on (L1 tiles inside L2 tiles, sized "
        "from the caches) or R (R first-level tiles per loop of a second-level tile)",
        flag=Flag("value", parse_tile2, "off|on|R"), normal=checked_tile2)
    caches: Mapping[str, int] | None = option(
        None, REST, "the cache sizes tiling sizes tiles and blocks for, by level "
        "(l1=32K,l2=512K,l3=32M; a level not given, and the default: the host's)",
        flag=Flag("value", parse_caches, "LEVEL=SIZE[,...]"), normal=_caches)

    vector_bits: int | None = option(
        None, REST, "the vector width in bits the tiling stage sizes register tiles for: "
        "512 (AVX-512), 256 (AVX2) or 128 (default: the host's widest; the code still "
        "runs on the host's)", flag=Flag("value", positive_int, "BITS"),
        normal=checked_vector_bits)

    def __post_init__(self):
        for f in fields(self):
            normal = f.metadata.get("normal")
            if normal is not None:
                object.__setattr__(self, f.name, normal(getattr(self, f.name)))

    @classmethod
    def of(cls, kind: str, given: Mapping[str, Any] | None = None, *,
           names: Sequence[str] | None = None) -> Options:
        """The options ``given`` (by name), over the defaults of ``kind`` (:data:`MODEL`
        or :data:`NEST`); a name that is not one of ``kind``'s options (or of ``names``,
        when given) is a :class:`PolycError` naming the nearest."""
        valid = list(names) if names is not None else option_names(kind)
        given = dict(given or {})
        kinds = {f.name: f.metadata["kinds"] for f in fields(cls)}
        for name in given:
            if name in kinds and kind not in kinds[name]:
                raise PolycError(f"{name!r} is an option of {KINDS[kinds[name][0]]}, not of "
                                 f"{KINDS[kind]}")
            if name not in valid:
                nearest = difflib.get_close_matches(name, valid, n=1)
                hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
                raise PolycError(f"unknown option {name!r}{hint} (the options are "
                                 f"{', '.join(valid)})")
        defaults = {f.name: f.metadata["by_kind"][kind] for f in fields(cls)
                    if kind in f.metadata["by_kind"]}
        return cls(**{**defaults, **given})

    def as_dict(self) -> dict[str, Any]:
        """Every option as JSON keeps it (tuples as lists, None mappings empty)."""
        data = {f.name: plain(getattr(self, f.name)) for f in fields(self)}
        for name in ("shapes", "dims", "params", "caches"):
            data[name] = data[name] or {}
        data["symbolic"] = data["symbolic"] or []
        return data

    def chosen(self, stage: str, kind: str) -> dict[str, Any]:
        """The options of ``stage`` (:data:`START` or :data:`REST`) that ``kind`` takes,
        as JSON keeps them."""
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)
                if f.metadata["stage"] == stage and kind in f.metadata["kinds"]}


def option_names(kind: str, stage: str | None = None) -> list[str]:
    """The names of ``kind``'s options (of ``stage`` only, when given), in order."""
    return [f.name for f in fields(Options) if kind in f.metadata["kinds"]
            and (stage is None or f.metadata["stage"] == stage)]


def default(name: str, kind: str):
    """Option ``name``'s default for ``kind``."""
    f = {f.name: f for f in fields(Options)}[name]
    return f.metadata["by_kind"].get(kind, f.default)


def plain(value):
    """``value`` as JSON keeps it: tuples as lists."""
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    return value


def describe(kind: str, names: Sequence[str] | None = None, **defaults) -> str:
    """The options of ``kind`` (or ``names`` of them) with their help, for docstrings
    (``defaults``: where the entry point's differ)."""
    chosen = option_names(kind) if names is None else list(names)
    lines = []
    for f in fields(Options):
        if f.name in chosen:
            value = defaults.get(f.name, default(f.name, kind))
            lines.append(f"- ``{f.name}`` (default ``{value!r}``): "
                         f"{f.metadata['help']}")
    return "\n".join(lines)


# --- the command line -------------------------------------------------------------------


def add_arguments(group, kinds: Sequence[str], skip: Sequence[str] = ()) -> None:
    """A flag for every option of any of ``kinds`` (but ``skip``) in ``group`` (an
    argparse parser or group); every flag defaults to None, "not given", so that the
    entry point's defaults apply (:func:`given`)."""
    for f in fields(Options):
        flag: Flag | None = f.metadata["flag"]
        if flag is None or f.name in skip or not set(kinds) & set(f.metadata["kinds"]):
            continue
        name = flag.flag(f.name)
        extra = {"metavar": flag.metavar} if flag.metavar else {}
        if flag.choices:
            extra["choices"] = flag.choices
        text = f.metadata["help"]
        if flag.form == "toggle":
            group.add_argument(name, dest=f.name, action=argparse.BooleanOptionalAction,
                               default=None, help=text)
        elif flag.form == "switch":
            group.add_argument(name, dest=f.name, action="store_true", default=None,
                               help=text)
        elif flag.form == "many":
            group.add_argument(name, dest=f.name, type=flag.parse, action="append",
                               default=None, help=text, **extra)
        else:
            group.add_argument(name, dest=f.name, type=flag.parse, help=text, **extra)


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line (flags of :func:`add_arguments`)."""
    found = {}
    for f in fields(Options):
        value = getattr(args, f.name, None)
        if value is None:
            continue
        flag: Flag = f.metadata["flag"]
        found[f.name] = flag.gather(value, flag.flag(f.name)) if flag.gather is not None \
            else value
    return found
