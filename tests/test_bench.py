"""`convtbc bench` end to end on a two-shape file: it must time every shape,
write the table, the JSON and the summary lines the docs quote, and report
ratios that follow from its own timings. (Speed targets live in the
benchmark itself, not here.)"""

import json
import subprocess

SHAPES = "T\tB\tC_in\tK\tC_out\tpad\tdtype\tflops\n9\t16\t48\t6\t8\t0\tbfloat16\t0\n17\t16\t64\t9\t16\t0\tfloat32\t0\n"


def test_bench_writes_its_report(convtbc_cli, tmp_path):
    shapes = tmp_path / "shapes.tsv"
    shapes.write_text(SHAPES)
    out = tmp_path / "out"
    p = subprocess.run([convtbc_cli, "bench", "--shapes", str(shapes), "--reps", "1", "--no-square", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    table = (out / "results.md").read_text()
    for label in ("T9 B16 Ci48 K6 Co8 p0 bfloat16", "T17 B16 Ci64 K9 Co16 p0 float32"):
        assert label in table
    assert "phase 2 on the smallest shared shape:" in table
    report = json.loads((out / "results.json").read_text())
    assert len(report["results"]) == 2
    for row in report["results"]:
        assert row["ours_s"] > 0 and row["ours_spread"][0] <= row["ours_s"] <= row["ours_spread"][1]
        shape = row["shape"]
        t_out = shape["t"] + 2 * shape["pad"] + 1 - shape["k"]
        flops = 4 * t_out * shape["b"] * shape["c_in"] * shape["c_out"] * shape["k"]  # the TSV's definition
        assert abs(row["gflops"] - flops / row["ours_s"] / 1e9) <= 1e-9 * row["gflops"]
        if row["torch_s"] is not None:
            assert abs(row["speedup_vs_torch"] - row["torch_s"] / row["ours_s"]) < 1e-9 * row["speedup_vs_torch"]
