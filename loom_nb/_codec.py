"""JSON encoding of the structured data that tool results and approvals carry.

Plain JSON values pass through. DataFrames are tagged and stored column by column with their
dtypes and index, so a frame loaded from a store equals the frame that was saved. pandas is
imported only when a DataFrame is actually met: ``import loom_nb`` stays light.
"""

from __future__ import annotations

import sys
from typing import Any

TAG = "__loom__"


def is_dataframe(value: Any) -> bool:
    pd = sys.modules.get("pandas")  # if pandas was never imported, value is no DataFrame
    return pd is not None and isinstance(value, pd.DataFrame)


def encode(value: Any) -> Any:
    """Turn ``value`` into JSON-able data that :func:`decode` turns back."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        items = {str(k): encode(v) for k, v in value.items()}
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
    raise ValueError(f"unknown encoded value {tag!r}")


def _encode_frame(df: Any) -> dict[str, Any]:
    import pandas as pd

    n_index = df.index.nlevels
    index_names = list(df.index.names)
    # Index levels first, then the columns by position (reset_index would re-infer an object
    # index of strings as "str", and flat[c] breaks on duplicate column labels).
    levels = [df.index.get_level_values(i) for i in range(n_index)]
    flat = [pd.Series(level, dtype=level.dtype) for level in levels]
    flat += [df.iloc[:, j] for j in range(df.shape[1])]
    return {
        "columns": [_encode_column(c) for c in flat],
        "labels": [encode(c) for c in df.columns],
        "labels_dtype": str(df.columns.dtype),
        "index_names": index_names,
        "default_index": _is_default_index(df),
    }


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
    mask = col.isna().to_numpy()
    values = [None if m else encode(v) for v, m in zip(col.tolist(), mask, strict=False)]
    return {"dtype": str(dtype), "values": values}


def _decode_column(data: dict[str, Any]) -> Any:
    import numpy as np
    import pandas as pd

    dtype = data["dtype"]
    if dtype == "category":
        categories = _decode_column(data["categories"])
        return pd.Categorical.from_codes(
            data["codes"], categories=pd.Index(categories), ordered=data["ordered"]
        )
    values = data["values"]
    if dtype.startswith(("datetime64", "timedelta64")):
        base = dtype.split(",")[0].split("[")
        unit = base[1].rstrip("]") if len(base) > 1 else "ns"
        kind = "M8" if dtype.startswith("datetime") else "m8"
        nat = np.iinfo(np.int64).min
        raw = np.array([nat if v is None else v for v in values], dtype="int64").view(
            f"{kind}[{unit}]"
        )
        series = pd.Series(raw)
        if "," in dtype:  # tz-aware: values are UTC instants
            series = series.dt.tz_localize("UTC").dt.tz_convert(dtype.split(",", 1)[1].strip(" ]"))
        return series.array
    if dtype == "object":
        return pd.array([decode(v) for v in values], dtype=object)
    series = pd.Series([decode(v) for v in values], dtype=object)
    try:
        return series.astype(dtype).array
    except (TypeError, ValueError):  # an exotic dtype this pandas cannot name: keep the values
        return series.array


def _decode_frame(data: dict[str, Any]) -> Any:
    import pandas as pd

    cols = data["columns"]
    index_names = data["index_names"]
    n_index = len(index_names)
    arrays = [_decode_column(c) for c in cols]
    # dtype= on each column: pandas 3 would infer "str" for an object column of strings.
    frame = pd.DataFrame(
        {i: pd.Series(arr, dtype=arr.dtype, copy=False) for i, arr in enumerate(arrays[n_index:])},
    )
    labels = [decode(label) for label in data["labels"]]
    try:
        frame.columns = pd.Index(labels, dtype=data.get("labels_dtype", "object"))
    except (TypeError, ValueError):
        frame.columns = pd.Index(labels, dtype=object)
    if data["default_index"]:
        return frame.set_axis(pd.RangeIndex(len(frame)), axis=0)
    if n_index == 1:
        index = pd.Index(arrays[0], dtype=arrays[0].dtype, name=index_names[0])
    else:
        index = pd.MultiIndex.from_arrays(arrays[:n_index], names=index_names)
    return frame.set_axis(index, axis=0)
