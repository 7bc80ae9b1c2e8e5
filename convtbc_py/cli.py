"""The `convtbc` command.

    convtbc demo                      CANN's documented examples (both ops) + a numpy check
    convtbc config --prefix|--cflags|--libs
    convtbc bench ...                 benchmarks (convtbc_py/bench.py, loaded lazily)
    convtbc info [--json]             the CPU, the kernel chosen, threads, library
    convtbc info --plan T B C_IN K C_OUT PAD DTYPE   implementations chosen per gradient
    convtbc --version                 the package version (convtbc_py.__version__)

`bench` forwards its arguments untouched to `convtbc_py.bench.main(argv) -> int`,
so the benchmark module owns its own options and help.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import sys
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ._version import __version__


# --------------------------------------------------------------------- config


def _config(args: argparse.Namespace) -> int:
    # Finds the tree without loading the library (or anything beyond it).
    from ._library import find_tree, install_advice

    tree = find_tree()
    if tree is None:
        print(f"convtbc config: no built convtbc: {install_advice()}", file=sys.stderr)
        return 1
    words: List[str] = []
    if args.prefix:
        if tree.prefix is None:
            print(f"convtbc config: the {tree.origin} has no CANN-shaped tree (headers in {tree.include}, "
                  f"library {tree.library}); --cflags and --libs work, or `pip install .` gives one",
                  file=sys.stderr)
            return 1
        words.append(str(tree.prefix))
    if args.cflags:
        # CANN's sample builds put both include/ and include/aclnn on the path.
        words += [f"-I{tree.include}", f"-I{tree.include / 'aclnn'}"]
    if args.libs:
        # The rpath lets the program find libconvtbc without LD_LIBRARY_PATH.
        lib64 = tree.library.parent
        link = "-lconvtbc" if (lib64 / "libconvtbc.so").is_file() else str(tree.library)
        words += [f"-L{lib64}", f"-Wl,-rpath,{lib64}", link]
    print(" ".join(words))
    return 0


# ----------------------------------------------------------------------- demo


class _DocumentedCase(NamedTuple):
    """One of CANN's documented examples, argument by argument: per tensor
    (shape, format, the value every element starts with, the value every
    element must hold after the call). Inputs are all ones; outputs start as
    NaN, so that an element the op never wrote cannot pass."""

    title: str
    tensors: Dict[str, Tuple[Tuple[int, ...], str, float, Optional[float]]]
    pad: int
    cube_math_type: int
    phase1: str
    phase2: str
    # The tensor names in the order phase 1 takes them, with "pad" and
    # "cube_math_type" where the scalars go.
    arguments: Tuple[str, ...]


_DOCUMENTED_CASES: Tuple[_DocumentedCase, ...] = (
    # With all ones each gradient element counts the terms of its sum:
    # C_out = 2 for gradInput, T_out * B = 5 for gradWeight and gradBias.
    _DocumentedCase(
        "aclnnConvTbcBackward, all ones, pad 0, cubeMathType 1",
        {"self": ((5, 1, 2), "ND", 1.0, None),
         "input": ((5, 1, 2), "ND", 1.0, None),
         "weight": ((1, 2, 2), "ND", 1.0, None),
         "bias": ((2,), "ND", 1.0, None),
         "gradInput": ((5, 1, 2), "ND", float("nan"), 2.0),
         "gradWeight": ((1, 2, 2), "ND", float("nan"), 5.0),
         "gradBias": ((2,), "ND", float("nan"), 5.0)},
        0, 1, "aclnnConvTbcBackwardGetWorkspaceSize", "aclnnConvTbcBackward",
        ("self", "input", "weight", "bias", "pad", "cube_math_type", "gradInput", "gradWeight", "gradBias")),
    # T_out = 2 + 2 - 3 + 1 = 2; each output step has two taps inside self,
    # of 3 channels: bias 1 + 2 * 3 = 7.
    _DocumentedCase(
        "aclnnConvTbc (forward), all ones, pad 1, cubeMathType 1",
        {"self": ((2, 2, 3), "NCL", 1.0, None),
         "weight": ((3, 3, 4), "NCL", 1.0, None),
         "bias": ((4,), "ND", 1.0, None),
         "out": ((2, 2, 4), "NCL", float("nan"), 7.0)},
        1, 1, "aclnnConvTbcGetWorkspaceSize", "aclnnConvTbc",
        ("self", "weight", "bias", "pad", "out", "cube_math_type")),
)


def _demo_cann_example(case: _DocumentedCase) -> bool:
    """A documented case through the raw C API, on a stream, with device memory."""
    from . import ffi, lib
    from ._cann import device_tensor
    from .errors import AclError, check

    print(f"CANN's documented example: {case.title} (raw C API)")
    # Every step registers its undoing, so the runtime is left as found
    # whether the case passes, fails or raises.
    with contextlib.ExitStack() as cleanup:
        check(lib.aclInit(ffi.NULL), AclError)
        cleanup.callback(lib.aclFinalize)
        check(lib.aclrtSetDevice(0), AclError)
        cleanup.callback(lib.aclrtResetDevice, 0)
        stream = ffi.new("aclrtStream *")
        check(lib.aclrtCreateStream(stream), AclError)
        cleanup.callback(lib.aclrtDestroyStream, stream[0])

        memory, tensors = {}, {}
        for name, (shape, format_name, fill, _) in case.tensors.items():
            memory[name], tensors[name] = device_tensor(np.full(shape, fill, np.float32), True, cleanup, format_name)

        workspace_size = ffi.new("uint64_t *")
        executor = ffi.new("aclOpExecutor **")
        scalars = {"pad": case.pad, "cube_math_type": case.cube_math_type}
        arguments = [scalars[name] if name in scalars else tensors[name] for name in case.arguments]
        check(getattr(lib, case.phase1)(*arguments, workspace_size, executor))
        workspace = ffi.NULL
        if workspace_size[0]:
            allocated = ffi.new("void **")
            check(lib.aclrtMalloc(allocated, workspace_size[0], lib.ACL_MEM_MALLOC_HUGE_FIRST), AclError)
            workspace = allocated[0]
            cleanup.callback(lib.aclrtFree, workspace)
        check(getattr(lib, case.phase2)(workspace, workspace_size[0], executor[0], stream[0]))
        check(lib.aclrtSynchronizeStream(stream[0]), AclError)

        passed = True
        for name, (shape, _, _, expected) in case.tensors.items():
            if expected is None:
                continue
            result = np.empty(shape, np.float32)
            check(lib.aclrtMemcpy(ffi.from_buffer(result), result.nbytes, memory[name], result.nbytes,
                                  lib.ACL_MEMCPY_DEVICE_TO_HOST), AclError)
            ok = bool(np.all(result == expected))
            passed &= ok
            print(f"  {name} {list(shape)} = {np.array2string(result.ravel())} "
                  f"(expected all {expected:g}) {'ok' if ok else 'WRONG'}")
    return passed


def _demo_numpy_check(seed: int) -> bool:
    """A random padded case through the numpy API against the float64 reference."""
    from .ops import conv_tbc_backward
    from .reference import conv_tbc_backward_reference

    T, B, C_in, K, C_out, pad = 9, 3, 5, 3, 4, 2
    T_out = T + 2 * pad + 1 - K
    print(f"numpy API, float32, T={T} B={B} C_in={C_in} K={K} C_out={C_out} pad={pad}, cube_math_type 0")
    rng = np.random.default_rng(seed)
    grad_output = rng.standard_normal((T_out, B, C_out)).astype(np.float32)
    x = rng.standard_normal((T, B, C_in)).astype(np.float32)
    w = rng.standard_normal((K, C_in, C_out)).astype(np.float32)
    b = rng.standard_normal(C_out).astype(np.float32)

    got = conv_tbc_backward(grad_output, x, w, b, pad, cube_math_type=0)
    want = conv_tbc_backward_reference(grad_output, x, w, b, pad)
    passed = True
    for name, g, r in zip(("grad_input", "grad_weight", "grad_bias"), got, want):
        error = float(np.max(np.abs(g.astype(np.float64) - r)))
        scale = float(np.max(np.abs(r)))
        relative = error / scale if scale else error
        ok = g.shape == r.shape and g.dtype == np.float32 and relative <= 1e-4
        passed &= ok
        print(f"  {name}: max abs error {error:.3e}, relative to max |ref| {relative:.3e} (bound 1e-4) {'ok' if ok else 'WRONG'}")
    return passed


def _demo(args: argparse.Namespace) -> int:
    from .errors import ConvTbcError

    passed = True
    cases: List[Callable[[], bool]] = [functools.partial(_demo_cann_example, case) for case in _DOCUMENTED_CASES]
    for case in cases + [lambda: _demo_numpy_check(args.seed)]:
        try:
            passed &= case()
        except ConvTbcError as exc:
            print(f"  error: {exc}")
            passed = False
    print("PASS" if passed else "FAIL")
    return 0 if passed else 1


# ---------------------------------------------------------------------- bench


def _bench(rest: Sequence[str]) -> int:
    name = f"{__package__}.bench"
    try:
        bench = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:  # bench itself is present but lacks a dependency
            raise
        print("convtbc bench: not available in this installation", file=sys.stderr)
        return 2
    return int(bench.main(list(rest)))


# ----------------------------------------------------------------------- info


def _info(args: argparse.Namespace) -> int:
    if args.plan:
        return _info_plan(args.plan)
    from .info import show_runtime

    show_runtime(as_json=args.json)
    return 0


def _info_plan(values: Sequence[str]) -> int:
    """Prints the implementation chosen for each gradient of one problem."""
    from .errors import ConvTbcError
    from .plan import plan_implementations

    try:
        t, b, c_in, k, c_out, pad = (int(v) for v in values[:6])
        chosen = plan_implementations(t, b, c_in, k, c_out, pad, values[6])
    except (ValueError, ConvTbcError) as error:
        print(f"convtbc info --plan: {error}", file=sys.stderr)
        return 2
    for gradient, name in chosen.items():
        print(f"{gradient}: {name}")
    return 0


# ----------------------------------------------------------------------- main


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, except where there is nothing to
    show: a flag's False, an unset option's None (its help says what then)."""

    def _get_help_string(self, action: argparse.Action) -> Optional[str]:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class _ParserShowingDefaults(argparse.ArgumentParser):
    """Subcommand parsers whose --help shows each option's default."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(**kwargs)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="convtbc", description="CPU implementation of CANN's aclnnConvTbc and aclnnConvTbcBackward.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                     parser_class=_ParserShowingDefaults)

    demo = commands.add_parser("demo", help="run CANN's examples of both ops and a numpy check; exit 1 on FAIL")
    demo.add_argument("--seed", type=int, default=0, help="seed of the random case")

    config = commands.add_parser("config", help="print build flags for C programs using convtbc")
    config.add_argument("--prefix", action="store_true", help="root of the CANN-shaped tree (include/, lib64/)")
    config.add_argument("--cflags", action="store_true", help="include flags")
    config.add_argument("--libs", action="store_true", help="link flags, with an rpath")

    # No options of its own: everything after `bench` belongs to the bench module.
    commands.add_parser("bench", help="benchmarks (options: convtbc bench --help)", add_help=False)

    info = commands.add_parser("info", help="the CPU, its caches, the kernel chosen, threads, library")
    info.add_argument("--json", action="store_true", help="as JSON")
    info.add_argument("--plan", nargs=7, metavar=("T", "B", "C_IN", "K", "C_OUT", "PAD", "DTYPE"),
                      help="instead, the implementation of each op's parts for this problem "
                           "(DTYPE float32|float16|bfloat16)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs `convtbc` with `argv` (default sys.argv[1:]); returns the exit status."""
    try:
        status = _run(argv)
        sys.stdout.flush()  # here, where a closed pipe can still be handled
        return status
    except BrokenPipeError:
        # The reader went away (`convtbc info --plan ... | head -1`): what is
        # left has nowhere to go, and Python would fail again flushing stdout
        # at exit, so stdout goes to /dev/null. 141 is what a shell reports
        # for a program that SIGPIPE ended.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141


def _run(argv: Optional[Sequence[str]]) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        return _bench(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "info":
        return _info(args)
    if args.command == "config":
        if not (args.prefix or args.cflags or args.libs):
            parser.error("config: give at least one of --prefix, --cflags, --libs")
        return _config(args)
    return _demo(args)


if __name__ == "__main__":
    sys.exit(main())
