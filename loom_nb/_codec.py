"""JSON encoding of the structured data that tool results and approvals carry.

Plain JSON values pass through. DataFrames are tagged and stored column by column with their
dtypes and index, so a frame loaded from a store equals the frame that was saved (the dates,
timestamps, durations and Decimals of object columns included, each tagged). pandas is
imported only when a DataFrame is actually met: ``import loom_nb`` stays light.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from loom_nb import _counts

TAG = "__loom__"


def is_dataframe(value: Any) -> bool:
    pd = sys.modules.get("pandas")  # if pandas was never imported, value is no DataFrame
    return pd is not None and isinstance(value, pd.DataFrame)


_PLAIN = frozenset({str, int, float, bool, type(None)})


def encode(value: Any) -> Any:
    """Turn ``value`` into JSON-able data that :func:`decode` turns back."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        items = {  # a plain value as it is: no call for each (most of a tool's dict)
            (k if type(k) is str else str(k)): (v if type(v) in _PLAIN else encode(v))
            for k, v in value.items()
        }
        return {TAG: "dict", "items": items} if TAG in items else items
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if is_dataframe(value):
        return {TAG: "dataframe", **_encode_frame(value)}
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.Series):
        return {TAG: "series", "frame": _encode_frame(value.to_frame())}
    if hasattr(value, "isoformat"):  # date, datetime, pandas Timestamp
        return value.isoformat()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def decode(data: Any) -> Any:
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    tag = data.get(TAG)
    if tag is None:
        return {k: decode(v) for k, v in data.items()}
    if tag == "dict":
        return {k: decode(v) for k, v in data["items"].items()}
    if tag == "dataframe":
        return _decode_frame(data)
    if tag == "series":
        frame = _decode_frame(data["frame"])
        return frame[frame.columns[0]]
    if tag in _OBJECT_TAGS:
        return _decode_object(tag, data)
    raise ValueError(f"unknown encoded value {tag!r}")


_pauses = 0
_pauses_lock = threading.Lock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the garbage collector while many frames are decoded at once (a thread's frames, an
    export): each frame makes thousands of objects that all live on, and the collector's passes
    over them were 40 % of a 5,000-message thread's decode. Nested and concurrent pauses count;
    the collector runs again after the last, and only if it was on before the first."""
    global _pauses
    with _pauses_lock:
        if _pauses == 0 and not gc.isenabled():
            paused_by_us = False
        else:
            paused_by_us = True
            _pauses += 1
            gc.disable()
    try:
        yield
    finally:
        if paused_by_us:
            with _pauses_lock:
                _pauses -= 1
                if _pauses == 0:
                    gc.enable()


@dataclass
class FrameHead:
    """The first rows of a frame, with what a table of them says about the whole frame."""

    head: Any
    rows: int
    columns: int
    #: The whole frame's index is an unnamed 0..n-1 (nothing worth showing).
    plain_index: bool
    #: How many rows the call matched, when a table tool said (``loom_nb._counts``).
    counts: dict[str, Any] | None = None


def frame_head(value: Any, rows: int) -> FrameHead | None:
    """:class:`FrameHead` of a DataFrame, or of an encoded one without decoding the rest of
    it (a saved thread shows a few rows of each frame); None for anything else."""
    if is_dataframe(value):
        found = _counts.counts_of(value)
        head = value.head(rows)
        return FrameHead(head, len(value), value.shape[1], _plain_index(value.index), found)
    if not (isinstance(value, dict) and value.get(TAG) == "dataframe"):
        return None
    names = value["index_names"]
    body = value["columns"][len(names) :]
    total = len(body[0]["codes" if body[0]["dtype"] == "category" else "values"]) if body else 0
    if value["default_index"]:  # no names: not written (earlier versions wrote [None])
        plain = not names or names == [None]
    else:
        plain = _plain_index(_decode_index(value, None))
    found = _counts.counts_of(value.get("attrs"))
    return FrameHead(_decode_frame(value, max(rows, 0)), total, len(body), plain, found)


def frame_outline(value: Any) -> tuple[Any, dict[str, Any] | None] | None:
    """The column labels (as the Index a decode makes holds them) and the counts a table
    tool saved (``loom_nb._counts``) of a DataFrame, or of an encoded one without decoding it
    (an export writes most calls' code from these alone); None for anything else."""
    if is_dataframe(value):
        return value.columns, _counts.counts_of(value)
    if not (isinstance(value, dict) and value.get(TAG) == "dataframe"):
        return None
    labels, dtype = value["labels"], value.get("labels_dtype")
    if dtype not in _TEXT_LABELS or not all(type(label) is str for label in labels):
        labels = _labels([decode(label) for label in labels], dtype)  # as a decode makes them
    return labels, _counts.counts_of(value.get("attrs"))


def encoded_outline(value: Any) -> dict[str, Any] | None:
    """Of an encoded DataFrame, what :func:`frame_outline` reads (its labels, the counts in
    its attrs), as an encoded DataFrame of no rows: a store keeps it beside the message, so
    that an export reads a frame's outline without parsing its rows. None for anything
    else."""
    if not (isinstance(value, dict) and value.get(TAG) == "dataframe"):
        return None
    attrs = value.get("attrs")
    found = attrs.get(_counts.ATTR) if isinstance(attrs, dict) else None
    outline = {TAG: "dataframe", "labels": value["labels"]}
    if "labels_dtype" in value:
        outline["labels_dtype"] = value["labels_dtype"]
    if found is not None:
        outline["attrs"] = {_counts.ATTR: found}
    return outline


#: Dtypes of an Index whose labels are the texts written (no Index is made to read them).
_TEXT_LABELS = frozenset({"object", "str", "string"})


def _plain_index(index: Any) -> bool:
    import pandas as pd

    return index.name is None and bool(index.equals(pd.RangeIndex(len(index))))


def _encode_frame(df: Any) -> dict[str, Any]:
    import pandas as pd

    default = _is_default_index(df)
    # An unnamed 0..n-1 index is not written (no index names, no values); any other index
    # comes first, level by level, then the columns by position (reset_index would re-infer
    # an object index of strings as "str", and flat[c] breaks on duplicate column labels).
    n_index = 0 if default and df.index.name is None else df.index.nlevels
    levels = [df.index.get_level_values(i) for i in range(n_index)]
    flat = [pd.Series(level, dtype=level.dtype) for level in levels]
    flat += [df.iloc[:, j] for j in range(df.shape[1])]
    out = {
        "columns": [_encode_column(c) for c in flat],
        "labels": [encode(c) for c in df.columns],
        "labels_dtype": str(df.columns.dtype),
        "index_names": list(df.index.names)[:n_index],
        "default_index": default,
    }
    found = _counts.counts_of(df)
    if found is not None:  # a table tool's counts: the views say them after a restart
        out["attrs"] = {_counts.ATTR: found}
    return out


def _is_default_index(df: Any) -> bool:
    import pandas as pd

    return isinstance(df.index, pd.RangeIndex) and df.index.start == 0 and df.index.step == 1


def _encode_column(col: Any) -> dict[str, Any]:
    import pandas as pd

    dtype = col.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return {
            "dtype": "category",
            "ordered": bool(dtype.ordered),
            "categories": _encode_column(pd.Series(dtype.categories)),
            "codes": col.cat.codes.tolist(),
        }
    if pd.api.types.is_datetime64_any_dtype(dtype) or pd.api.types.is_timedelta64_dtype(dtype):
        # Integers in the column's own unit: exact, and NaT becomes None.
        ints = col.array.asi8 if hasattr(col.array, "asi8") else col.astype("int64").to_numpy()
        mask = col.isna().to_numpy()
        values = [None if m else int(v) for v, m in zip(ints.tolist(), mask, strict=False)]
        return {"dtype": str(dtype), "values": values}
    if pd.api.types.is_object_dtype(dtype):
        return {"dtype": str(dtype), "values": [_encode_object(v) for v in col.tolist()]}
    mask = col.isna().to_numpy()
    values = [None if m else encode(v) for v, m in zip(col.tolist(), mask, strict=False)]
    return {"dtype": str(dtype), "values": values}


def _encode_object(value: Any) -> Any:
    """A value of an object column: as :func:`encode` has it, except the values JSON has no
    type for, which are tagged so that they come back as themselves, not as their text (a
    column of ``datetime.date``, of Decimals read from a database, of timestamps in several
    time zones, and which missing value a missing one is: NaN, NaT, NA or None). A timestamp
    keeps its zone's name; other zones keep their offset."""
    import datetime as dt
    import decimal

    pd = sys.modules["pandas"]
    if value is None:
        return None
    if value is pd.NA or value is pd.NaT or (isinstance(value, float) and value != value):
        return {
            TAG: "missing",
            "as": "NA" if value is pd.NA else "NaT" if value is pd.NaT else "NaN",
        }
    if isinstance(value, pd.Timestamp):
        zone = value.tz
        named = getattr(zone, "key", None) or getattr(zone, "zone", None)
        if named is None and zone is not None and zone is dt.timezone.utc:
            named = "UTC"
        return {TAG: "timestamp", "iso": value.isoformat(), "unit": value.unit, "tz": named}
    if isinstance(value, pd.Timedelta):
        return {TAG: "timedelta", "value": int(value.value), "unit": value.unit}
    if isinstance(value, dt.timedelta):
        return {TAG: "duration", "parts": [value.days, value.seconds, value.microseconds]}
    for kind in ("datetime", "date", "time"):  # a datetime is a date too: it goes first
        if isinstance(value, getattr(dt, kind)):
            return {TAG: kind, "iso": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {TAG: "decimal", "text": str(value)}
    return encode(value)


#: The tags of :func:`_encode_object`.
_OBJECT_TAGS = frozenset(
    {"timestamp", "timedelta", "datetime", "date", "time", "duration", "decimal", "missing"}
)


def _decode_object(tag: str, data: dict[str, Any]) -> Any:
    import datetime as dt
    import decimal

    if tag == "decimal":
        return decimal.Decimal(data["text"])
    if tag == "missing":
        import pandas as pd

        return {"NA": pd.NA, "NaT": pd.NaT}.get(data["as"], float("nan"))
    if tag in ("datetime", "date", "time"):
        return getattr(dt, tag).fromisoformat(data["iso"])
    if tag == "duration":
        days, seconds, microseconds = data["parts"]
        return dt.timedelta(days=days, seconds=seconds, microseconds=microseconds)
    import pandas as pd

    if tag == "timedelta":
        return pd.Timedelta(data["value"], unit="ns").as_unit(data["unit"])
    stamp = pd.Timestamp(data["iso"]).as_unit(data["unit"])
    return stamp.tz_convert(data["tz"]) if data["tz"] is not None else stamp


def _decode_column(data: dict[str, Any], rows: int | None = None) -> Any:
    """One encoded column as a pandas array, in bulk (numpy reads the value lists at once);
    only its first ``rows`` values when that is given."""
    import numpy as np
    import pandas as pd

    dtype = data["dtype"]
    if dtype == "category":
        codes = data["codes"] if rows is None else data["codes"][:rows]
        return pd.Categorical.from_codes(
            np.array(codes, dtype=np.int64), dtype=_category_dtype(data)
        )
    values = data["values"] if rows is None else data["values"][:rows]
    if dtype.startswith(("datetime64", "timedelta64")):
        base = dtype.split(",")[0].split("[")
        unit = base[1].rstrip("]") if len(base) > 1 else "ns"
        kind = "M8" if dtype.startswith("datetime") else "m8"
        raw = np.array([_NAT if v is None else v for v in values], dtype=np.int64).view(
            f"{kind}[{unit}]"
        )
        if "," not in dtype:
            return raw
        return _utc_instants(raw, dtype)
    if dtype == "object":
        out = np.empty(len(values), dtype=object)  # filled one by one: lists stay values
        for i, v in enumerate(values):
            out[i] = decode(v)
        return out
    kind, named = _dtype_named(dtype)
    if kind in ("i", "u", "b") or (kind == "f" and dtype != "float16"):
        # null (a missing float) becomes NaN; ints and bools have no missing values
        return np.array(values, dtype=named)
    try:
        if isinstance(named, pd.api.extensions.ExtensionDtype):
            # what pd.array ends in for an extension dtype, less its dispatch
            return named.construct_array_type()._from_sequence(values, dtype=named)
        return pd.array(values, dtype=named)  # str, Int64, boolean, Float64, ...: in bulk
    except (TypeError, ValueError):
        pass
    series = pd.Series([decode(v) for v in values], dtype=object)
    try:
        return series.astype(dtype).array
    except (TypeError, ValueError):  # an exotic dtype this pandas cannot name: keep the values
        return series.array


_NAT = -(2**63)


def _category_dtype(data: dict[str, Any]) -> Any:
    """The dtype of an encoded category column: a thread's frames share their categories,
    and making the dtype (which checks them) was most of decoding a small frame."""
    import pandas as pd

    categories = data["categories"]
    # By type and value: 1, 1.0 and True apart; -0.0 and 0.0 too (by repr)
    key = tuple((type(v), repr(v) if isinstance(v, float) else v) for v in categories["values"])
    try:
        return _shared_category_dtype(categories["dtype"], key, bool(data["ordered"]))
    except TypeError:  # tagged values (dicts): not hashable
        return pd.CategoricalDtype(pd.Index(_decode_column(categories)), data["ordered"])


@functools.lru_cache(maxsize=256)
def _shared_category_dtype(dtype: str, key: tuple[tuple[type, Any], ...], ordered: bool) -> Any:
    """One dtype for each set of categories (a dtype is immutable: pandas shares them too)."""
    import pandas as pd

    values = [v for _, v in key]
    if any(t is float for t, _ in key):
        values = [float(v) if t is float else v for t, v in key]
    column = _decode_column({"dtype": dtype, "values": values})
    return pd.CategoricalDtype(pd.Index(column), ordered)


def _private(owner: Any, name: str) -> Any:
    """A private pandas constructor that skips checks the decoded arrays do not need, or None
    (each use falls back to the public way, as it does when the constructor fails)."""
    return getattr(owner, name, None)


@functools.lru_cache(maxsize=256)
def _dtype_named(dtype: str) -> tuple[str, Any]:
    """The numpy kind ("" for none) and the dtype object of a dtype's name, parsed once."""
    import numpy as np
    import pandas as pd

    try:
        named = pd.api.types.pandas_dtype(dtype)  # "str" is pandas' string dtype, not numpy's
    except TypeError:
        return "", dtype
    return (named.kind if isinstance(named, np.dtype) else ""), named


def _utc_instants(raw: Any, dtype: str) -> Any:
    """``raw`` (datetime64 integers, UTC instants) in the tz-aware ``dtype``."""
    import pandas as pd

    named = _dtype_named(dtype)[1]
    make = _private(pd.arrays.DatetimeArray, "_simple_new")  # the values as they are
    if make is not None and isinstance(named, pd.DatetimeTZDtype):
        try:
            return make(raw, dtype=named)
        except (TypeError, ValueError):  # a pandas whose private constructor changed
            pass
    zone = dtype.split(",", 1)[1].strip(" ]")
    return pd.DatetimeIndex(raw).tz_localize("UTC").tz_convert(zone).array


def _decode_frame(data: dict[str, Any], rows: int | None = None) -> Any:
    """An encoded frame (its first ``rows`` rows when that is given)."""
    import pandas as pd

    n_index = len(data["index_names"])
    arrays = [_decode_column(c, rows) for c in data["columns"][n_index:]]
    columns = _labels([decode(label) for label in data["labels"]], data.get("labels_dtype"))
    index = _decode_index(data, rows)
    if index is None:
        index = pd.RangeIndex(len(arrays[0]) if arrays else 0)
    from_blocks = _from_blocks()
    if from_blocks is not None:
        try:
            return _with_attrs(from_blocks(_blocks(arrays), index=index, columns=columns), data)
        except (TypeError, ValueError):  # a pandas whose constructor changed
            pass
    build = _private(pd.DataFrame, "_from_arrays")  # pandas' own constructor: no checks
    if build is not None:
        try:
            return _with_attrs(
                build(arrays, columns=columns, index=index, verify_integrity=False), data
            )
        except (TypeError, ValueError):  # a pandas whose private constructor changed
            pass
    frame = pd.DataFrame(
        {i: pd.Series(a, dtype=a.dtype, index=index, copy=False) for i, a in enumerate(arrays)},
        index=index,
    )
    frame.columns = columns
    return _with_attrs(frame, data)


@functools.lru_cache(maxsize=1)
def _from_blocks() -> Any:
    """pandas' constructor of a frame from its blocks as they are (pandas 3), or None."""
    try:
        from pandas.api.internals import create_dataframe_from_blocks
    except ImportError:
        return None
    return create_dataframe_from_blocks


def _blocks(arrays: list[Any]) -> list[tuple[Any, Any]]:
    """The frame's blocks as pandas lays them out for numbers: the columns of one numeric
    dtype in one 2-D block; any other column a block of its own (pandas' grouping of those is
    what made building a small frame cost more than decoding its columns)."""
    import numpy as np
    import pandas as pd

    blocks: list[tuple[Any, Any]] = []
    numeric: dict[Any, list[int]] = {}
    for i, array in enumerate(arrays):
        if type(array) is pd.arrays.NumpyExtensionArray:  # pd.array's numpy (not a subclass)
            arrays[i] = array = array.to_numpy()
        if isinstance(array, np.ndarray) and array.dtype.kind in "biufc":
            numeric.setdefault(array.dtype, []).append(i)
        else:
            one = array.reshape(1, -1) if isinstance(array, np.ndarray) else array
            blocks.append((one, np.array([i], dtype=np.intp)))
    for at in numeric.values():
        # (columns, rows), as a block holds them
        many = [arrays[i] for i in at]
        values = many[0].reshape(1, -1) if len(many) == 1 else np.vstack(many)
        blocks.append((values, np.array(at, dtype=np.intp)))
    return blocks


def _with_attrs(frame: Any, data: dict[str, Any]) -> Any:
    found = _counts.counts_of(data.get("attrs"))
    if found is not None:
        _counts.with_counts(frame, found)
    return frame


def _labels(labels: list[Any], dtype: str | None) -> Any:
    """The columns' Index, in the dtype it had (objects when this pandas cannot make it)."""
    import pandas as pd

    key = tuple((type(label), label) for label in labels)  # 1, 1.0 and True apart
    try:
        hash(key)
    except TypeError:  # a label that is a list or a dict
        return pd.Index(labels, dtype=object)
    try:
        shared = _labels_index(key, dtype or "object")
    except (TypeError, ValueError):
        return pd.Index(labels, dtype=object)
    view = _private(shared, "_view")  # what copy() makes, less its checks: a name of its own
    return view() if view is not None else shared.copy()


@functools.lru_cache(maxsize=512)
def _labels_index(key: tuple[tuple[type, Any], ...], dtype: str) -> Any:
    """One Index per set of labels, copied for each frame: a thread's frames share them."""
    import pandas as pd

    return pd.Index([label for _, label in key], dtype=dtype)


def _decode_index(data: dict[str, Any], rows: int | None) -> Any:
    """The frame's index; None for an unnamed 0..n-1 (the frame makes that one)."""
    import numpy as np
    import pandas as pd

    names = data["index_names"]
    if data["default_index"]:
        if not names or names[0] is None:
            return None
        first = data["columns"][0]["values"]  # a named 0..n-1: its values were written
        return pd.RangeIndex(len(first) if rows is None else min(rows, len(first)), name=names[0])
    arrays = [_decode_column(c, rows) for c in data["columns"][: len(names)]]
    if len(names) == 1:
        first = arrays[0]
        make = _private(pd.Index, "_simple_new")  # the values as they are, no inference
        if make is not None and isinstance(first, np.ndarray) and first.dtype.kind in "biuf":
            try:
                return make(first, name=names[0])
            except (TypeError, ValueError):  # a pandas whose private constructor changed
                pass
        return pd.Index(first, dtype=first.dtype, name=names[0])
    return pd.MultiIndex.from_arrays(arrays, names=names)
