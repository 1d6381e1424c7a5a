#!/usr/bin/env python3
"""regrid's ROI pooling next to torchvision's CPU roi_pool, on identical inputs, in one run.

Generates the benchmark's three cases as .npy files, times torchvision (forward with argmax,
and backward) single-threaded, runs build/release/bench/regrid_roi_bench on the same files,
checks that `regrid roi-pool --framework torchvision` reproduces torchvision's output and argmax
bit for bit, and prints a table of times and ratios (torchvision time / regrid time).

    /usr/bin/python3 bench/roi_pool_vs_torchvision.py [--build build/release] [--repeat 10]

Needs Debian's python3-torch, python3-torchvision and python3-numpy.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

from peer_timing import median_ms
import torch
import torchvision  # noqa: F401  (registers torch.ops.torchvision)

CASES = [  # the same cases, in the same order, as bench/roi_pool_bench.cpp
    ("2x256x64x64_r512_7x7_s1/8", (2, 256, 64, 64), 512, 7, 0.125),
    ("1x512x38x50_r300_7x7_s1/16", (1, 512, 38, 50), 300, 7, 0.0625),
    ("4x64x128x128_r1000_14x14_s1/8", (4, 64, 128, 128), 1000, 14, 0.125),
]


def make_case(shape, roi_count, scale, rng):
    n, _, h, w = shape
    x = rng.standard_normal(shape, dtype=np.float32)
    image_w, image_h = w / scale, h / scale
    xs = rng.uniform(0, image_w, size=(roi_count, 2))
    ys = rng.uniform(0, image_h, size=(roi_count, 2))
    rois = np.stack([rng.integers(0, n, roi_count).astype(np.float64), xs.min(1), ys.min(1), xs.max(1), ys.max(1)], 1)
    return x, rois.astype(np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build/release")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(7)
    build = pathlib.Path(args.build)
    rows = []
    with tempfile.TemporaryDirectory() as work:
        torchvision_ms = {}
        for index, (name, shape, roi_count, pooled, scale) in enumerate(CASES):
            x, rois = make_case(shape, roi_count, scale, rng)
            np.save(f"{work}/case{index}_input.npy", x)
            np.save(f"{work}/case{index}_rois.npy", rois)
            tx, troi = torch.from_numpy(x), torch.from_numpy(rois)
            out, argmax = torch.ops.torchvision.roi_pool(tx, troi, scale, pooled, pooled)
            grad = torch.ones_like(out)
            n, c, h, w = shape
            forward = median_ms(lambda: torch.ops.torchvision.roi_pool(tx, troi, scale, pooled, pooled), args.repeat)
            backward = median_ms(lambda: torch.ops.torchvision._roi_pool_backward(
                grad, troi, argmax, scale, pooled, pooled, n, c, h, w), args.repeat)
            torchvision_ms[name] = (forward, backward)
            # Bit-exactness on the very same files, through the CLI.
            subprocess.run([str(build / "regrid"), "roi-pool", f"{work}/case{index}_input.npy", f"{work}/case{index}_rois.npy",
                            f"{work}/out.npy", "--pooled-size", str(pooled), str(pooled), "--spatial-scale", str(scale),
                            "--framework", "torchvision", "--argmax", f"{work}/argmax.npy"], check=True)
            same = (np.load(f"{work}/out.npy").tobytes() == out.numpy().tobytes() and
                    np.array_equal(np.load(f"{work}/argmax.npy"), argmax.numpy()))
            rows.append((name, same))
        env = dict(os.environ, REGRID_ROI_INPUTS=work)
        result = subprocess.run([str(build / "bench" / "regrid_roi_bench"), "--benchmark_format=json",
                                 f"--benchmark_repetitions={max(3, args.repeat // 3)}",
                                 "--benchmark_report_aggregates_only=true"],
                                env=env, check=True, capture_output=True, text=True)
        regrid_ms = {}
        for bench in json.loads(result.stdout)["benchmarks"]:
            if bench.get("aggregate_name") == "median":
                regrid_ms[bench["run_name"]] = bench["real_time"]

    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, 1 thread each; "
          f"median ms; ratio = torchvision / regrid")
    print("regrid fwd: fresh outputs per call, like torchvision; 'no cache': with regrid's memory cache off")
    print(f"{'case':32} {'layout':6} {'tv fwd':>8} {'regrid':>8} {'ratio':>6} {'no cache':>8} {'ratio':>6} "
          f"{'tv bwd':>8} {'regrid':>8} {'ratio':>6}  exact")
    for name, same in rows:
        tv_forward, tv_backward = torchvision_ms[name]
        for layout in ("NCHW", "NHWC"):
            forward = regrid_ms[f"roi_pool_forward/{name}/{layout}"]
            uncached = regrid_ms[f"roi_pool_forward_uncached/{name}/{layout}"]
            backward = regrid_ms[f"roi_pool_backward/{name}/{layout}"]
            print(f"{name:32} {layout:6} {tv_forward:8.2f} {forward:8.2f} {tv_forward / forward:6.1f} "
                  f"{uncached:8.2f} {tv_forward / uncached:6.1f} "
                  f"{tv_backward:8.2f} {backward:8.2f} {tv_backward / backward:6.1f}  {'yes' if same else 'NO'}")
    return 0 if all(same for _, same in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
