"""Cost of the classification predictives: each analytic one vs mc_bridge.

For N points with C classes (default 10,000 and 10), random means ``2 N(0, 1)``
and full covariances ``A A^T / C`` (``A`` standard normal), in float64 on one
torch thread, times (median of --repeats calls) ``mc_bridge`` with
--n-samples draws per point and each analytic predictive, and prints a
Markdown table with the ratio analytic / mc_bridge.

    python benchmarks/bench_predictives.py [--points 10000] [--classes 10] [--n-samples 1000]
"""

import argparse
from functools import partial

import torch
from timing import median_seconds

from sklearn_quinn._core.link_approximations import PREDICTIVES, mc_bridge


def random_gaussians(n_points, n_classes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    mean = 2 * torch.randn(n_points, n_classes, generator=generator, dtype=torch.float64)
    factor = torch.randn(n_points, n_classes, n_classes, generator=generator, dtype=torch.float64)
    return mean, factor @ factor.mT / n_classes


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--n-samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    mean, cov = random_gaussians(args.points, args.classes)
    generator = torch.Generator().manual_seed(0)
    mc_seconds = median_seconds(partial(mc_bridge, mean, cov, args.n_samples, generator), args.repeats)

    print(
        f"{args.points} points, {args.classes} classes, full covariances, float64, "
        f"{args.threads} torch thread(s), median of {args.repeats}\n"
    )
    print("| predictive | median seconds | ratio to mc_bridge |")
    print("|---|---:|---:|")
    print(f"| mc_bridge ({args.n_samples} draws) | {mc_seconds:.4f} | 1 |")
    for name, predictive in PREDICTIVES.items():
        if name == "mc_bridge":
            continue
        seconds = median_seconds(partial(predictive, mean, cov), args.repeats)
        print(f"| {name} | {seconds:.4f} | {seconds / mc_seconds:.2g} |")


if __name__ == "__main__":
    main()
