"""Arrow arrays as numpy arrays and Python values without importing pandas: pyarrow's `to_numpy`, `pa.array`
and `pa.scalar` import it (a third of a second), so the readers of big tables take the buffers themselves."""

from __future__ import annotations

import numpy as np

_FIXED = {"int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
          "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64, "halffloat": np.float16,
          "float": np.float32, "double": np.float64}


def _chunks(arr) -> list:
    return arr.chunks if hasattr(arr, "chunks") else [arr]


def _joined(parts: list[np.ndarray], dtype) -> np.ndarray:
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def _bits(buffer, offset: int, length: int) -> np.ndarray:
    raw = np.frombuffer(buffer, dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[offset:offset + length].astype(bool)


def valid(arr) -> np.ndarray:
    """Which elements are not null (an Array or a ChunkedArray)."""
    parts = []
    for chunk in _chunks(arr):
        bitmap = chunk.buffers()[0]
        if not chunk.null_count or bitmap is None:
            parts.append(np.full(len(chunk), chunk.null_count == 0))
        else:
            parts.append(_bits(bitmap, chunk.offset, len(chunk)))
    return _joined(parts, bool)


def fixed(arr) -> np.ndarray:
    """The values of a fixed-width numeric array as they are in its buffer (whatever sits under a null);
    without a copy when it is one piece."""
    dtype = _FIXED[str(arr.type)]
    parts = [np.frombuffer(chunk.buffers()[1], dtype=dtype)[chunk.offset:chunk.offset + len(chunk)]
             for chunk in _chunks(arr)]
    return _joined(parts, dtype)


def floats(arr) -> tuple[np.ndarray, np.ndarray]:
    """A float64 array's values (NaN where null) and which are not null."""
    values, ok = fixed(arr), valid(arr)
    if not ok.all():
        values = np.where(ok, values, np.nan)
    return values, ok


def booleans(arr) -> np.ndarray:
    """A boolean array's values, False where null."""
    parts = [_bits(chunk.buffers()[1], chunk.offset, len(chunk)) for chunk in _chunks(arr)]
    return _joined(parts, bool) & valid(arr)


def is_error(exc: Exception) -> bool:
    """An exception pyarrow raised (ArrowInvalid, ArrowNotImplementedError, ArrowTypeError, ...)."""
    return type(exc).__module__.startswith("pyarrow")
