"""A small reader of the safetensors format into numpy arrays (the examples' weight loader).

The format: an 8-byte little-endian header length n, then n bytes of JSON mapping each tensor
name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data that follows the
header; an optional "__metadata__" entry holds strings), then the raw little-endian data.
"""
from __future__ import annotations

import json
import struct

import numpy as np

# safetensors dtype -> numpy dtype; BF16 arrives as its raw 16 bits and is widened to float32
DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
    "BOOL": np.bool_,
}


def load(data: bytes) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file's bytes, by name (BF16 widened to float32)."""
    if len(data) < 8:
        raise ValueError(f"safetensors: {len(data)} bytes is too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"safetensors: header of {n} bytes runs past the end of the {len(data)}-byte file")
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out[name] = _tensor(name, entry, body)
    return out


def _tensor(name: str, entry: dict, body: memoryview) -> np.ndarray:
    dtype = entry["dtype"]
    if dtype not in DTYPES:
        raise ValueError(f"safetensors: tensor {name} has dtype {dtype}; supported: {', '.join(DTYPES)}")
    begin, end = entry["data_offsets"]
    shape = tuple(entry["shape"])
    arr = np.frombuffer(body[begin:end], dtype=np.dtype(DTYPES[dtype]).newbyteorder("<"))
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"safetensors: tensor {name} has {arr.size} elements for shape {list(shape)}")
    arr = arr.reshape(shape)
    if dtype == "BF16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(arr.dtype.newbyteorder("="), copy=True)   # native order, owning, writable
