"""A histogram's bins, counted before any array of them is made.

numpy's ``bins="auto"`` makes one edge per bin of its rule before anyone can cap them; before
numpy 2.3 the rule has no bound of its own, so 10,000 rows and one outlier asked for 824 MB
(more as the outlier grows). Here the same rule (numpy 2.3's) is worked out on a few numbers,
the count capped, and only then are the edges made: the same bins, and the same memory, on
every numpy the dependencies allow. Needs numpy only, so exported code can use it too.
"""

from __future__ import annotations

import numpy as np

#: A histogram has at most this many bins (numpy's "auto" rule below that).
MAX_BINS = 50


def bin_edges(values: np.ndarray, max_bins: int = MAX_BINS) -> np.ndarray:
    """The edges of numpy's "auto" bins of ``values`` (finite numbers, at least one), at most
    ``max_bins`` of them."""
    values = np.asarray(values, dtype="float64")
    count = min(auto_bins(values), max_bins)
    try:
        edges: np.ndarray = np.histogram_bin_edges(values, bins=count)
    except ValueError:  # a range too narrow for ``count`` distinct edges (1.0 and the next float)
        edges = np.histogram_bin_edges(values, bins=1)
    return edges


def auto_bins(values: np.ndarray) -> int:
    """How many bins numpy 2.3's "auto" rule gives ``values``: the narrower of the
    Freedman-Diaconis width (at least half the square-root rule's) and Sturges' width. A float
    until it is known to be small, so a huge count is never an allocation (nor an overflow)."""
    low, high = float(values.min()), float(values.max())
    spread = high - low
    if not spread:
        return 1
    n = values.size
    q75, q25 = np.percentile(values, [75, 25])
    freedman_diaconis = 2.0 * float(q75 - q25) * n ** (-1.0 / 3.0)
    width = min(max(freedman_diaconis, spread / np.sqrt(n) / 2), spread / (np.log2(n) + 1.0))
    bins = np.ceil(spread / width) if width else 1.0
    return int(bins) if bins < 2**31 else 2**31
