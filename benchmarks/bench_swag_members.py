"""What MultiSWAG's members cost and give: SWAGRegressor with one member and with several, side by side.

On UCI regression splits (the standard protocol of ``uci_protocol.py``:
inputs standardised with the training split's statistics, ``random_state`` the
split), ``SWAGRegressor(n_estimators=1)`` (Maddox et al.'s SWAG around the
MAP) and ``SWAGRegressor(n_estimators=J)`` (MultiSWAG, the default ``J = 5``)
are fitted one after the other on each split, in alternating order, on one
torch thread. Prints per split and data set the test log-likelihood per point,
the 95% coverage and the fit seconds of each, then the median time ratio
J members / one member.

    python benchmarks/bench_swag_members.py [--datasets yacht concrete] [--splits 0 1 2] [--members 5]
"""

import argparse
import statistics
import warnings

import numpy as np
import torch
from uci_protocol import DEFAULT_DATA_DIR, fmt, run_split

from sklearn_quinn import SWAGRegressor


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--datasets", nargs="+", default=["yacht", "concrete"])
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", UserWarning)  # cov_scale='auto' widening warnings: the scores tell

    counts = {"one": 1, "several": args.members}
    ratios = []
    print(f"| data set | split | 1 member: LL, coverage, s | {args.members} members: LL, coverage, s | ratio |")
    print("|---|---|---|---|---|")
    for data in args.datasets:
        records = {name: [] for name in counts}
        for split in args.splits:
            order = list(counts) if split % 2 == 0 else list(counts)[::-1]
            result = {name: run_split(SWAGRegressor(n_estimators=counts[name]), args.data_dir, data, split)
                      for name in order}
            ratio = result["several"]["seconds"] / result["one"]["seconds"]
            ratios.append(ratio)
            cells = [f"{r['ll']:.3f}, {r['coverage_95']:.3f}, {r['seconds']:.1f}" for r in result.values()]
            if order[0] != "one":
                cells.reverse()
            print(f"| {data} | {split} | {cells[0]} | {cells[1]} | {ratio:.2f} |", flush=True)
            for name in counts:
                records[name].append((result[name]["ll"], result[name]["coverage_95"]))
        for name in counts:
            ll, coverage = np.array(records[name]).T
            print(f"| {data} | mean | {counts[name]} member(s): LL {fmt(ll, 2)}, coverage {fmt(coverage)} | | |")
    print(f"\nTime ratio {args.members} members / 1 member: median {statistics.median(ratios):.2f} "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f})")


if __name__ == "__main__":
    main()
