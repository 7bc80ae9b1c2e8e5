"""Benchmark the ops against PyTorch's CPU kernels and numpy's sgemm.

    convtbc bench [--op backward|forward|step] [--max-flops 2e10] [--reps 5] [--out bench-results]
    convtbc bench --random 40 --seed 1 [--max-flops 2e10] ...

For each problem size (CANN's system-test shapes shipped in
data/st_shapes.tsv, or --random shapes drawn from CANN's system-test ranges,
plus a few square GEMM-like cases; every case above --max-flops is left out)
it times, interleaved in one process: convtbc (numpy API), PyTorch (when
installed) and a square numpy float32 matmul of the same FLOPs (the
machine's practical peak). --op picks what is timed: the backward op
(conv_tbc_backward against torch.ops.aten.conv_tbc_backward), the forward
op (conv_tbc against torch.conv_tbc) or one training step, forward then
backward, against torch's two; shapes CANN's forward checker refuses
(T + pad < K) are left out of the forward and step runs.
Medians of --reps runs; the spread is the min..max of our runs. It writes
results.md, results.json and, with matplotlib, speedup.png to --out, and
prints a summary with geometric means per dtype; with --random also the
drawn shapes, shapes.tsv, which --shapes reads back. `run()` does the same
for scripts. The summary also times one call of ours on a mid-sized shape
right after torch's and after numpy's sgemm (their threads still spinning)
and after an idle pause (`stall_ms`): the waits a parallel region meets
next to other libraries.

The --random draw (`draw_shapes`): CANN's system tests take T and B in
1..4096, C_in in 1..1600, K in 1..255, C_out in 1..4096, pad in 0..29. Each
size is drawn octave-uniform: a power-of-two octave [2^e, 2^(e+1)) with
equal probability (the top octave, cut short by the range's end, in
proportion to its width), then a value uniformly inside it, so that small,
medium and large sizes are equally common rather than almost all near the
top; pad is uniform, the dtype uniform over the chosen dtypes. A shape with
T_out = T + 2 pad + 1 - K < 1 or more than --max-flops FLOPs is drawn again
whole. Only Python's `random.Random(seed).random()`, whose sequence Python
guarantees for a seed, and correctly rounded arithmetic are used: the same
seed gives the same shapes on any machine and Python version.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import ml_dtypes
import numpy as np

from ._library import ffi, lib
from .errors import check
from .ops import conv_tbc, conv_tbc_backward

SHAPES_FILE = Path(__file__).resolve().parent / "data" / "st_shapes.tsv"

# Square GEMM-like cases: long T, wide channels, short kernels. The first
# and the last are issue 13's sgemm targets (1.0e11 and 6.4e10 FLOPs: they
# need a --max-flops above the default).
SQUARE_CASES = (
    (257, 32, 1024, 3, 1024, 1, "float32"),
    (129, 16, 512, 3, 512, 1, "float32"),
    (129, 16, 512, 3, 512, 1, "bfloat16"),
    (129, 64, 512, 5, 768, 1, "float32"),
)

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}

# Multiply-adds x2 per (t_out, b, c_in, c_out, k): the forward op's GEMM,
# the backward op's two (gradInput, gradWeight), a training step's three.
OP_FLOPS = {"backward": 4, "forward": 2, "step": 6}


@dataclass
class Shape:
    t: int
    b: int
    c_in: int
    k: int
    c_out: int
    pad: int
    dtype: str
    source: str = "st_shapes"
    op: str = "backward"

    @property
    def t_out(self) -> int:
        return self.t + 2 * self.pad + 1 - self.k

    @property
    def flops(self) -> int:
        return OP_FLOPS[self.op] * self.t_out * self.b * self.c_in * self.c_out * self.k

    @property
    def forward_refused(self) -> bool:
        """CANN's forward checker refuses T + pad < K (its one-sided pad check)."""
        return self.t + self.pad < self.k

    def label(self) -> str:
        return f"T{self.t} B{self.b} Ci{self.c_in} K{self.k} Co{self.c_out} p{self.pad} {self.dtype}"


@dataclass
class Result:
    shape: Shape
    ours_s: float
    ours_spread: List[float]
    torch_s: Optional[float]
    sgemm_s: float
    extra: Dict[str, float] = field(default_factory=dict)

    @property
    def gflops(self) -> float:
        return self.shape.flops / self.ours_s / 1e9

    @property
    def speedup_vs_torch(self) -> Optional[float]:
        return self.torch_s / self.ours_s if self.torch_s else None

    @property
    def fraction_of_sgemm(self) -> float:
        return self.sgemm_s / self.ours_s


def load_shapes(path: Path = SHAPES_FILE, max_flops: float = 2e10) -> List[Shape]:
    shapes = []
    for line in path.read_text().splitlines():
        if not line or line.startswith("#") or line.startswith("T\t"):
            continue
        t, b, c_in, k, c_out, pad, dtype, _flops = line.split("\t")
        shape = Shape(int(t), int(b), int(c_in), int(k), int(c_out), int(pad), dtype)
        if shape.flops <= max_flops:
            shapes.append(shape)
    return shapes


def square_shapes(max_flops: float = math.inf) -> List[Shape]:
    shapes = [Shape(*case, source="square") for case in SQUARE_CASES]
    return [s for s in shapes if s.flops <= max_flops]


# CANN's system-test ranges for aclnnConvTbcBackward (see the module docstring).
RANDOM_RANGES = {"t": 4096, "b": 4096, "c_in": 1600, "k": 255, "c_out": 4096}
RANDOM_PAD_MAX = 29
# Draws allowed per shape before --max-flops is declared too small to meet.
RANDOM_ATTEMPTS = 1_000_000


def _octave_uniform(rng: random.Random, top: int) -> int:
    """A size in 1..top: an octave [2^e, 2^(e+1)) with equal probability,
    the last one (cut at top) weighted by the fraction of it that remains,
    then a value uniformly inside the octave. Every operation is exact or
    correctly rounded, so the result is the same on any IEEE-754 machine."""
    last = top.bit_length() - 1
    octaves = last + (top + 1 - (1 << last)) / (1 << last)  # a dyadic fraction: exact
    e = min(int(rng.random() * octaves), last)
    low = 1 << e
    return low + int(rng.random() * (min(2 * low, top + 1) - low))


def draw_shapes(count: int, seed: int, max_flops: float, dtypes: Sequence[str] = tuple(DTYPES)) -> List[Shape]:
    """`count` shapes from CANN's system-test ranges (the rule is in the
    module docstring); the same for a seed on any machine."""
    smallest = Shape(1, 1, 1, 1, 1, 0, "float32").flops
    if max_flops < smallest:
        raise ValueError(f"--max-flops {max_flops:g} is below the smallest problem's {smallest} FLOPs")
    rng = random.Random(seed)
    shapes = []
    for _ in range(count):
        for _ in range(RANDOM_ATTEMPTS):
            sizes = {name: _octave_uniform(rng, top) for name, top in RANDOM_RANGES.items()}
            pad = int(rng.random() * (RANDOM_PAD_MAX + 1))
            dtype = dtypes[int(rng.random() * len(dtypes))]
            shape = Shape(sizes["t"], sizes["b"], sizes["c_in"], sizes["k"], sizes["c_out"], pad, dtype,
                          source="random")
            if shape.t_out >= 1 and shape.flops <= max_flops:
                shapes.append(shape)
                break
        else:
            raise ValueError(f"--max-flops {max_flops:g}: no shape found in {RANDOM_ATTEMPTS} draws; raise it")
    return shapes


def write_shapes(shapes: Sequence[Shape], path: Path, origin: str) -> None:
    """`shapes` as a TSV in data/st_shapes.tsv's format (load_shapes reads it)."""
    lines = [f"# {origin}",
             "# flops = 4*T_out*B*C_in*C_out*K (gradInput + gradWeight multiply-adds, x2).",
             "T\tB\tC_in\tK\tC_out\tpad\tdtype\tflops"]
    # flops as the format has them (the backward op's), whatever op was timed
    lines += ["\t".join(str(v) for v in (s.t, s.b, s.c_in, s.k, s.c_out, s.pad, s.dtype,
                                          dataclasses.replace(s, op="backward").flops)) for s in shapes]
    path.write_text("\n".join(lines) + "\n")


def _inputs(shape: Shape, rng: np.random.Generator):
    dtype = DTYPES[shape.dtype]

    def make(*dims: int) -> np.ndarray:
        return rng.standard_normal(dims, dtype=np.float32).astype(dtype)

    return (make(shape.t_out, shape.b, shape.c_out), make(shape.t, shape.b, shape.c_in),
            make(shape.k, shape.c_in, shape.c_out), make(shape.c_out))


def _ours_runner(shape: Shape, arrays) -> Callable[[], object]:
    g, x, w, b = arrays
    if shape.op == "forward":
        return lambda: conv_tbc(x, w, b, shape.pad)
    if shape.op == "step":
        return lambda: (conv_tbc(x, w, b, shape.pad), conv_tbc_backward(g, x, w, b, shape.pad))
    return lambda: conv_tbc_backward(g, x, w, b, shape.pad)


def _torch_runner(shape: Shape, arrays) -> Optional[Callable[[], object]]:
    try:
        import torch
    except ImportError:
        return None
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[shape.dtype]
    g, x, w, b = [torch.from_numpy(np.asarray(a, dtype=np.float32)).to(torch_dtype) for a in arrays]
    forward, backward = torch.conv_tbc, torch.ops.aten.conv_tbc_backward

    def run() -> object:
        with torch.no_grad():
            if shape.op == "forward":
                return forward(x, w, b, shape.pad)
            if shape.op == "step":
                return forward(x, w, b, shape.pad), backward(g, x, w, b, shape.pad)
            return backward(g, x, w, b, shape.pad)

    return run


def _sgemm_runner(flops: int, rng: np.random.Generator) -> Callable[[], object]:
    n = max(1, round((flops / 2) ** (1 / 3)))
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    scale = flops / (2.0 * n ** 3)  # n is rounded: correct the time to the shape's FLOPs
    out = np.empty((n, n), np.float32)

    def run() -> object:
        return np.matmul(a, b, out=out)

    run.scale = scale  # type: ignore[attr-defined]
    return run


# Each library keeps its worker threads spinning for a while after a call
# (OpenBLAS for ~0.1 s); on 2 cores the next library's parallel region then
# waits for a core. A pause before each timing lets the previous pool go idle,
# so that no library is timed against another's spinning threads.
SETTLE_SECONDS = 0.15


def _time(fn: Callable[[], object], min_seconds: float = 0.02) -> float:
    """Seconds per call: calls repeated until min_seconds pass (short cases)."""
    time.sleep(SETTLE_SECONDS)
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


class Progress:
    """A one-line progress bar on stderr (only when it is a terminal, or forced)."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.done, self.enabled = total, 0, enabled
        self.start = time.perf_counter()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = width * self.done // max(self.total, 1)
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{elapsed:5.0f}s eta {eta:4.0f}s  {label[:48]:<48}")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run(shapes: Sequence[Shape], reps: int = 5, progress: bool = False, seed: int = 0) -> List[Result]:
    """Times every shape; reps rounds interleave ours, torch's and sgemm's."""
    rng = np.random.default_rng(seed)
    results = []
    bar = Progress(len(shapes), progress)
    for shape in shapes:
        arrays = _inputs(shape, rng)
        ours = _ours_runner(shape, arrays)
        torch_run = _torch_runner(shape, arrays)
        sgemm = _sgemm_runner(shape.flops, rng)
        ours()  # warm up: first-touch pages, thread pools
        if torch_run:
            torch_run()
        sgemm()
        times: Dict[str, List[float]] = {"ours": [], "torch": [], "sgemm": []}
        for _ in range(reps):
            times["ours"].append(_time(ours))
            if torch_run:
                times["torch"].append(_time(torch_run))
            times["sgemm"].append(_time(sgemm) * sgemm.scale)  # type: ignore[attr-defined]
        results.append(Result(
            shape=shape,
            ours_s=statistics.median(times["ours"]),
            ours_spread=[min(times["ours"]), max(times["ours"])],
            torch_s=statistics.median(times["torch"]) if times["torch"] else None,
            sgemm_s=statistics.median(times["sgemm"]),
        ))
        bar.step(shape.label())
    return results


PHASE2_CALLS, PHASE2_BATCHES = 2000, 5


def phase2_overhead_us(calls: int = PHASE2_CALLS, batches: int = PHASE2_BATCHES) -> Tuple[float, float, float]:
    """µs per aclnnConvTbcBackward call on the smallest shared shape, with a
    repeatable executor (phase 1 once), run where it is submitted: the
    median, min and max over `batches` batches of `calls` calls, each after
    the same settling pause as every other timing."""
    shape = min(load_shapes(), key=lambda s: s.flops)
    rng = np.random.default_rng(1)
    arrays = list(_inputs(shape, rng))
    outs = [np.empty_like(arrays[1]), np.empty_like(arrays[2]), np.empty_like(arrays[3])]
    code = {"float32": lib.ACL_FLOAT, "float16": lib.ACL_FLOAT16, "bfloat16": lib.ACL_BF16}[shape.dtype]
    keep = []

    def tensor(a: np.ndarray):
        dims = ffi.new("int64_t[]", a.shape)
        strides = ffi.new("int64_t[]", [s // a.itemsize for s in a.strides])
        t = lib.aclCreateTensor(dims, a.ndim, code, strides, 0, lib.ACL_FORMAT_ND, dims, a.ndim,
                                ffi.cast("void *", a.ctypes.data))
        keep.append(t)
        check(lib.convtbcDeclareHostMemory(ffi.cast("void *", a.ctypes.data), a.nbytes), )
        return t

    tensors = [tensor(a) for a in arrays + outs]
    size = ffi.new("uint64_t *")
    executor = ffi.new("aclOpExecutor **")
    check(lib.aclnnConvTbcBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[2], tensors[3], shape.pad, 0,
                                                   tensors[4], tensors[5], tensors[6], size, executor))
    check(lib.aclSetAclOpExecutorRepeatable(executor[0]))
    workspace = np.empty(max(size[0], 1) + 64, np.uint8)
    address = (workspace.ctypes.data + 63) // 64 * 64
    if size[0]:
        check(lib.convtbcDeclareHostMemory(ffi.cast("void *", address), size[0]))
    run_phase2, workspace_ptr, workspace_size = lib.aclnnConvTbcBackward, ffi.cast("void *", address), size[0]
    try:
        per_call = []
        for _ in range(batches):
            time.sleep(SETTLE_SECONDS)
            failed = 0
            start = time.perf_counter()
            for _ in range(calls):
                failed |= run_phase2(workspace_ptr, workspace_size, executor[0], ffi.NULL)
            per_call.append((time.perf_counter() - start) / calls * 1e6)
            check(failed)
        return statistics.median(per_call), min(per_call), max(per_call)
    finally:
        check(lib.aclDestroyAclOpExecutor(executor[0]))
        for a in arrays + outs:
            lib.convtbcForgetHostMemory(ffi.cast("void *", a.ctypes.data))
        if size[0]:
            lib.convtbcForgetHostMemory(ffi.cast("void *", address))
        for t in keep:
            lib.aclDestroyTensor(t)


# The stall measurement: one call of ours on a mid-sized shape (a few
# hundred microseconds on 2 threads), timed alone, at once after another
# library's parallel call, and after an idle pause.
STALL_SHAPE = Shape(t=9, b=32, c_in=832, k=3, c_out=32, pad=0, dtype="float32")
STALL_CALLS = 15


def stall_ms(calls: int = STALL_CALLS) -> Dict[str, float]:
    """Median ms of one backward call on STALL_SHAPE: "hot" (right after one
    of ours), "idle" (after a pause of SETTLE_SECONDS, every thread asleep),
    "after torch" (right after torch's conv_tbc_backward on the same shape,
    whose OpenMP threads are then spinning) and "after sgemm" (right after
    numpy's sgemm of the same FLOPs, OpenBLAS's threads spinning)."""
    rng = np.random.default_rng(1)
    arrays = _inputs(STALL_SHAPE, rng)
    ours = _ours_runner(STALL_SHAPE, arrays)
    before: Dict[str, Optional[Callable[[], object]]] = {
        "hot": ours, "idle": None, "after torch": _torch_runner(STALL_SHAPE, arrays),
        "after sgemm": _sgemm_runner(STALL_SHAPE.flops, rng)}
    out: Dict[str, float] = {}
    for name, first in before.items():
        if name == "after torch" and first is None:
            continue
        times = []
        for _ in range(calls):
            time.sleep(SETTLE_SECONDS)
            if first is not None:
                first()
            start = time.perf_counter()
            ours()
            times.append(time.perf_counter() - start)
        out[name] = statistics.median(times) * 1e3
    return out


def time_ours(shape: Shape, seed: int = 0) -> float:
    """Seconds per call of ours alone on `shape` (after the settling pause)."""
    arrays = _inputs(shape, np.random.default_rng(seed))
    return _time(_ours_runner(shape, arrays))


def thread_scaling(reps: int = 5) -> Dict[str, List[float]]:
    """Seconds for the first square case with OMP_NUM_THREADS=1 and 2, each
    timed in `reps` fresh processes (the thread count is fixed when the
    library plans), the two counts alternating so that drift in the
    machine's speed hits both alike."""
    out: Dict[str, List[float]] = {"1": [], "2": []}
    code = "from convtbc_py import bench; print(bench.time_ours(bench.square_shapes()[0]))"
    for _ in range(reps):
        for threads in ("1", "2"):
            env = dict(os.environ, OMP_NUM_THREADS=threads)
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  check=True, cwd=tempfile.gettempdir())
            out[threads].append(float(proc.stdout.strip().splitlines()[-1]))
    return out


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarize(results: Sequence[Result]) -> List[str]:
    lines = []
    for dtype in DTYPES:
        rows = [r for r in results if r.shape.dtype == dtype and r.shape.source != "square"]
        speedups = [r.speedup_vs_torch for r in rows if r.speedup_vs_torch]
        if not rows:
            continue
        line = f"{dtype}: {len(rows)} shapes, geomean {geomean([r.gflops for r in rows]):.1f} GFLOP/s"
        if speedups:
            worst = min(rows, key=lambda r: r.speedup_vs_torch or math.inf)
            line += (f", geomean speedup vs torch {geomean(speedups):.2f}x, lowest {min(speedups):.2f}x "
                     f"({worst.shape.label()})")
        line += f", geomean fraction of sgemm {geomean([r.fraction_of_sgemm for r in rows]):.2f}"
        lines.append(line)
    for r in results:
        if r.shape.source == "square":
            lines.append(f"square {r.shape.label()}: {r.gflops:.1f} GFLOP/s = {r.fraction_of_sgemm:.0%} of sgemm"
                         + (f", {r.speedup_vs_torch:.2f}x torch" if r.speedup_vs_torch else ""))
    return lines


def markdown(results: Sequence[Result]) -> str:
    head = ("| shape | flops | ours ms (min..max) | torch ms | sgemm ms | ours GFLOP/s | vs torch | of sgemm |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|\n")
    rows = []
    for r in results:
        torch_ms = f"{r.torch_s * 1e3:.3f}" if r.torch_s else "-"
        vs = f"{r.speedup_vs_torch:.2f}x" if r.speedup_vs_torch else "-"
        rows.append(f"| {r.shape.label()} | {r.shape.flops:.3g} | {r.ours_s * 1e3:.3f} "
                    f"({r.ours_spread[0] * 1e3:.3f}..{r.ours_spread[1] * 1e3:.3f}) | {torch_ms} | "
                    f"{r.sgemm_s * 1e3:.3f} | {r.gflops:.1f} | {vs} | {r.fraction_of_sgemm:.0%} |")
    return head + "\n".join(rows) + "\n"


def plot(results: Sequence[Result], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = sorted(results, key=lambda r: r.shape.flops)
    colors = {"float32": "tab:blue", "float16": "tab:orange", "bfloat16": "tab:green"}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
    x = range(len(rows))
    for i, r in zip(x, rows):
        if r.speedup_vs_torch:
            top.bar(i, r.speedup_vs_torch, color=colors[r.shape.dtype])
        bottom.bar(i, r.fraction_of_sgemm, color=colors[r.shape.dtype])
    top.set_yscale("log")
    top.axhline(1.0, color="black", linewidth=0.8)
    top.set_ylabel("speedup over torch (log)")
    bottom.set_yscale("log")
    bottom.set_ylabel("fraction of an equal-FLOPs sgemm (log)")
    bottom.set_xticks(list(x))
    bottom.set_xticklabels([r.shape.label() for r in rows], rotation=90, fontsize=6)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    top.legend(handles, list(colors), loc="upper left")
    ops = sorted({r.shape.op for r in results})
    top.set_title(f"convtbc {', '.join(ops)} vs torch, shapes by FLOPs")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def _parser() -> argparse.ArgumentParser:
    from .cli import DefaultsHelpFormatter

    paragraphs = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(prog="convtbc bench", description=paragraphs[0], epilog=paragraphs[-1],
                                     formatter_class=DefaultsHelpFormatter)
    # A string default is parsed like the command line's, and --help shows it as written.
    parser.add_argument("--op", choices=sorted(OP_FLOPS), default="backward",
                        help="what is timed: the backward op, the forward op, or a training step (both)")
    parser.add_argument("--max-flops", type=float, default="2e10",
                        help="leave out every case above this many FLOPs (shared, random and square); "
                             "the cap of the --random draw")
    parser.add_argument("--reps", type=int, default=5, help="timed rounds per shape (median)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="results folder")
    parser.add_argument("--shapes", type=Path,
                        help=f"TSV of shapes (CANN st_shapes format); default: the shipped sample of CANN's list, "
                             f"{SHAPES_FILE.name}")
    parser.add_argument("--random", type=int, metavar="N",
                        help="instead of --shapes, N shapes drawn from CANN's system-test ranges "
                             "(written to OUT/shapes.tsv)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --random draw")
    parser.add_argument("--dtype", choices=sorted(DTYPES), action="append",
                        help="only these dtypes (repeat for several; all when not given)")
    parser.add_argument("--no-square", action="store_true", help="skip the square GEMM-like cases")
    parser.add_argument("--scaling", action="store_true", help="also time 1 vs 2 threads on the first square case")
    return parser


def select_shapes(args: argparse.Namespace) -> List[Shape]:
    """The cases a parsed command line asks for, in the order they are timed."""
    dtypes = [d for d in DTYPES if not args.dtype or d in args.dtype]
    # Drawn and listed as for the backward op (so a seed gives the same
    # shapes whatever --op), then capped by the FLOPs of the op timed.
    if args.random is not None:
        shapes = draw_shapes(args.random, args.seed, args.max_flops, dtypes)
    else:
        shapes = load_shapes(args.shapes or SHAPES_FILE, math.inf)
    if not args.no_square:
        shapes += square_shapes()
    op = getattr(args, "op", "backward")
    shapes = [dataclasses.replace(s, op=op) for s in shapes if s.dtype in dtypes]
    return [s for s in shapes if s.flops <= args.max_flops and not (op != "backward" and s.forward_refused)]


def main(argv: List[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.random is not None and args.shapes is not None:
        parser.error("--random and --shapes: give one")
    if args.random is not None and args.random < 1:
        parser.error(f"--random: expected a count >= 1, got {args.random}")
    try:
        shapes = select_shapes(args)
    except ValueError as exc:
        parser.error(str(exc))
    command = "convtbc bench " + " ".join(argv)
    if not shapes:
        parser.error("no case left: every shape is above --max-flops (or refused by the forward op)")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.random is not None:
        write_shapes([s for s in shapes if s.source == "random"], args.out / "shapes.tsv",
                     f"Drawn by `{command}` (convtbc_py/bench.py, draw_shapes); "
                     f"repeat with --shapes {args.out / 'shapes.tsv'} --max-flops {args.max_flops:g}")
    results = run(shapes, reps=args.reps, progress=sys.stderr.isatty())
    summary = summarize(results)
    phase2, phase2_lo, phase2_hi = phase2_overhead_us()
    summary.append(f"phase 2 on the smallest shared shape: {phase2:.1f} us a call "
                   f"(median of {PHASE2_BATCHES} batches of {PHASE2_CALLS} calls, {phase2_lo:.1f}..{phase2_hi:.1f})")
    stall = stall_ms()
    summary.append(f"next to other libraries, one call on {STALL_SHAPE.label()} (medians of {STALL_CALLS}): "
                   + ", ".join(f"{name} {ms:.3f} ms" for name, ms in stall.items()))
    if args.scaling:
        scaling = thread_scaling(args.reps)
        one, two = (statistics.median(scaling[n]) for n in ("1", "2"))
        ratios = sorted(a / b for a, b in zip(scaling["1"], scaling["2"]))
        summary.append(f"threads: 1 -> {one * 1e3:.1f} ms, 2 -> {two * 1e3:.1f} ms, {one / two:.2f}x "
                       f"(medians of {len(ratios)} alternating processes; per-pair ratios "
                       f"{ratios[0]:.2f}..{ratios[-1]:.2f})")

    (args.out / "results.md").write_text(
        f"# convtbc bench\n\n`{command}`, medians of {args.reps}\n\n" + markdown(results) + "\n"
        + "\n".join(f"- {line}" for line in summary) + "\n")
    (args.out / "results.json").write_text(json.dumps(
        {"command": command, "summary": summary,
         "results": [dict(asdict(r), gflops=r.gflops, speedup_vs_torch=r.speedup_vs_torch) for r in results]},
        indent=1))
    plotted = plot(results, args.out / "speedup.png")
    print(markdown(results))
    print("\n".join(summary))
    print(f"written: {args.out}/results.md, results.json" + (", shapes.tsv" if args.random is not None else "")
          + (", speedup.png" if plotted else " (pip install matplotlib for the plot)"))
    return 0
