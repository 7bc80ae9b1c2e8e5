"""Two builds of libconvtbc timed in one process, for A/B comparisons that
alternating processes blur on a shared machine.

Both libraries are loaded (two dlopens of two files) and the numpy front
end's library is swapped between them in blocks: per round and shape, each
build gets a warm-up call, a 20 ms pause (its team's idle workers stop
spinning after 2 ms, so the other build's never compete), and the best of
two `bench._time` timings; the order of the builds alternates by round.
Prints the median and minimum ratios B/A per shape and their geomean. From
the repository root, with the package installed:

    python tools/ab_libraries.py --rounds 8 /tmp/old/libconvtbc.so.0 \\
        /tmp/new/libconvtbc.so.0 15,257,1440,14,256,0 9,16,48,6,8,0,bfloat16

(a shape is T,B,C_in,K,C_out,pad[,dtype], float32 by default). The two
paths must be different files: dlopen of one path twice gives one library.
Shapes under a millisecond still swing by tens of percent between rounds;
read those by the minima.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("library_a", type=Path)
    parser.add_argument("library_b", type=Path)
    parser.add_argument("shapes", nargs="+", help="T,B,C_in,K,C_out,pad[,dtype]")
    args = parser.parse_args()
    if args.library_a.resolve() == args.library_b.resolve():
        parser.error("library_a and library_b are the same file")

    os.environ["CONVTBC_LIBRARY"] = str(args.library_a)
    import numpy as np
    from convtbc_py import _library, bench, ops

    loaded = _library.load()
    libraries = [loaded.lib, _library._dlopen(loaded.ffi, args.library_b, "library_b")]
    ratios = []
    for spec in args.shapes:
        fields = spec.split(",")
        shape = bench.Shape(*map(int, fields[:6]), fields[6] if len(fields) > 6 else "float32")
        run = bench._ours_runner(shape, bench._inputs(shape, np.random.default_rng(0)))
        times = [[], []]
        for r in range(args.rounds):
            for which in (0, 1) if r % 2 == 0 else (1, 0):
                ops.lib = libraries[which]
                run()
                time.sleep(0.02)
                times[which].append(min(bench._time(run) for _ in range(2)))
        a, b = statistics.median(times[0]), statistics.median(times[1])
        ratios.append(b / a)
        print(f"{shape.label()}: A {a * 1e3:.3f} ms, B {b * 1e3:.3f} ms, median ratio {b / a:.3f}, "
              f"min ratio {min(times[1]) / min(times[0]):.3f}", flush=True)
    print(f"geomean of median ratios {statistics.geometric_mean(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
