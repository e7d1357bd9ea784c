"""Tables stored as one 1-D dataset per column, read back within the reader's size bounds."""
from __future__ import annotations

from typing import Any, Sequence

import h5py
import numpy as np

from ...errors import CorruptFileError
from .layout import ALLOWED_FILTERS, MAX_TABLE_BYTES, MAX_TABLE_ROWS


def write_strings(group: Any, name: str, values: Sequence[str]) -> None:
    """A column of UTF-8 strings."""
    group.create_dataset(name, data=np.array(list(values), dtype=object), dtype=h5py.string_dtype(),
                         shape=(len(values),))


def write_ints(group: Any, name: str, values: Sequence[int], dtype: str = "<i8") -> None:
    """A column of integers."""
    group.create_dataset(name, data=np.asarray(list(values), dtype=dtype).reshape(-1))


def checked(f: Any, name: str, path: str) -> Any:
    """The dataset ``name`` of file ``f``, refused unless it is a plain, bounded, locally stored one."""
    link = f.get(name, getlink=True)
    if link is None:
        raise CorruptFileError(path, f"missing dataset {name}")
    if not isinstance(link, h5py.HardLink):
        # external and soft links could point anywhere, other files included
        raise CorruptFileError(path, f"{name} is a {type(link).__name__}; only plain datasets are read")
    ds = f[name]
    if not isinstance(ds, h5py.Dataset):
        raise CorruptFileError(path, f"{name} is not a dataset")
    if ds.is_virtual or ds.external:
        raise CorruptFileError(path, f"{name} keeps its data outside the file; refused")
    plist = ds.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        code = plist.get_filter(i)[0]
        if code not in ALLOWED_FILTERS:
            raise CorruptFileError(path, f"{name} needs HDF5 filter {code} (a plugin); refused")
    return ds


def read_table_column(f: Any, name: str, path: str, rows: int | None = None) -> np.ndarray:
    """One column (or a table) read whole, after checking its claimed size against the bounds."""
    ds = checked(f, name, path)
    n = int(ds.shape[0]) if ds.shape else 1
    if n > MAX_TABLE_ROWS or ds.size * ds.dtype.itemsize > MAX_TABLE_BYTES:
        raise CorruptFileError(path, f"{name} claims {ds.size} rows of {ds.dtype.itemsize} bytes; "
                               "refused (corrupt or not written by tdbg)")
    if rows is not None and n != rows:
        raise CorruptFileError(path, f"{name} has {n} rows, expected {rows}")
    return ds[()]


def strings(col: np.ndarray) -> list[str]:
    """Decoded strings of a string column."""
    return [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v) for v in col]
