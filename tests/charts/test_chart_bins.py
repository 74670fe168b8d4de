"""A histogram's bins are counted before any array of them is made: numpy's "auto" bins, at
most 50, on every numpy the dependencies allow, in bounded memory."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from loom_nb.charts._bins import MAX_BINS, auto_bins, bin_edges
from tests.conftest import require

ROOT = Path(__file__).parents[2]
NEW_RULE = tuple(int(p) for p in np.__version__.split(".")[:2]) >= (2, 3)

finite = st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)


@pytest.mark.skipif(not NEW_RULE, reason="numpy's own rule before 2.3 is another one")
@settings(max_examples=400, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 400), elements=finite)
    | arrays(np.float64, st.integers(1, 400), elements=st.integers(-30, 30).map(float))
)
def test_the_bins_are_numpys_auto_bins_capped(values: np.ndarray):
    expected = np.histogram_bin_edges(values, bins="auto")
    if len(expected) - 1 > MAX_BINS:
        expected = np.histogram_bin_edges(values, bins=MAX_BINS)
    np.testing.assert_array_equal(bin_edges(values), expected)


@pytest.mark.parametrize("outlier", [1e3, 1.3e7, 1e15, 1e300])
def test_one_outlier_counts_a_huge_number_of_bins_but_makes_at_most_fifty(outlier: float):
    values = np.concatenate([np.random.default_rng(0).normal(size=10_000), [outlier]])
    assert auto_bins(values) > MAX_BINS
    edges = bin_edges(values)
    assert len(edges) == MAX_BINS + 1 and edges[0] == values.min() and edges[-1] == outlier


def test_a_range_too_narrow_for_its_bins_is_one_bin_not_an_error():
    values = np.array([1.0, np.nextafter(1.0, 2.0), 1.0, 1.0])
    assert list(bin_edges(values)) == [1.0, np.nextafter(1.0, 2.0)]
    assert list(bin_edges(np.array([5.0]))) == [4.5, 5.5]  # one value: numpy's one bin


def lowest_numpy() -> str:
    """The numpy floor pyproject.toml declares."""
    found = re.search(r'"numpy>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text())
    assert found, "pyproject.toml declares no numpy floor"
    return found.group(1)


#: Run in the old numpy's venv: the tool's plan and drawing of 10,000 rows and one outlier,
#: under an address-space limit of what the process holds after a first small chart plus
#: 200 MB. numpy's own "auto" rule must fail under that limit (it asks for about 790 MB), or
#: the limit would prove nothing.
UNDER_A_LIMIT = """
import resource
import numpy as np
import pandas as pd
from loom_nb.charts import _draw
from loom_nb.charts._plot import plan

def address_space():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")

values = np.concatenate([np.random.default_rng(0).normal(size=10_000), [1.3e7]])
frame = pd.DataFrame({"v": values})
spec = {"kind": "histogram", "x": "v", "y": None, "color": None, "title": None, "left_out": {}}
_draw.png(_draw.figure(plan(spec, frame.head(100))))  # fonts and caches load first
limit = address_space() + 200 * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
plot = plan(spec, frame)
drawn = _draw.png(_draw.figure(plot))
print(np.__version__, len(plot.bins) - 1, int(sum(s.y.sum() for s in plot.series)), len(drawn) > 0)
try:
    np.histogram_bin_edges(values, bins="auto")
    print("numpy's auto bins fit")
except MemoryError:
    print("numpy's auto bins do not fit")
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_histogram_with_an_outlier_stays_small_on_the_lowest_numpy():
    """In the venv `make test` builds with the numpy floor of pyproject.toml (pandas and
    matplotlib as pip resolves them next to it): the test the shared environment, with a newer
    numpy, cannot be."""
    version = lowest_numpy()
    python = ROOT / ".venv-numpy-floor" / "bin" / "python"
    require(python.exists(), "the numpy floor's venv (.venv-numpy-floor: `make test` builds it)")
    done = subprocess.run(
        [str(python), "-c", UNDER_A_LIMIT],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, done.stderr
    installed, bins, rows, drawn, *said = done.stdout.split()
    if sys.version_info < (3, 13):  # the floor has no wheel for 3.13: the newest before 2.3
        assert installed == version
    assert tuple(int(p) for p in installed.split(".")[:2]) < (2, 3)
    assert (bins, rows, drawn) == ("50", "10001", "True")
    assert " ".join(said) == "numpy's auto bins do not fit"


@pytest.mark.parametrize(
    "arguments, drawn",
    [
        ({"kind": "histogram", "x": "w"}, "2 rows in"),
        ({"kind": "bar", "x": "k", "y": "w"}, "2 bars"),
        ({"kind": "scatter", "x": "w", "y": "v"}, "2 points"),
    ],
)
async def test_infinite_numbers_are_left_out_and_counted_as_missing_ones_are(
    arguments: dict[str, str], drawn: str
):
    """A database's float column may hold Infinity: it has no place on an axis (numpy's bins
    raised on it, ending the call)."""
    import pandas as pd

    from loom_nb.charts import Chart
    from tests.charts._chart_data import PNG, draw, results

    frame = pd.DataFrame(
        {"w": [1.0, np.inf, -np.inf, 2.0], "v": [1.0, 2.0, 3.0, 4.0], "k": ["a", "b", "c", "d"]}
    )
    out = await draw(results(("c", "t", frame)), result="c", **arguments)
    assert not out.is_error and out.chart is not None, out.content
    assert drawn in out.content and "2 rows without w not shown" in out.content.lower()
    assert Chart(out.chart).png().startswith(PNG)
