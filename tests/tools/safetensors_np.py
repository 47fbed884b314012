#!/usr/bin/python3
"""A numpy-only safetensors reader/writer: the independent side of hpod's tests.

Run with Debian's python3 (python3-numpy); no safetensors or torch package needed.

  safetensors_np.py check FILE SPEC_JSON
      Reads FILE (written by hpod) and checks it against SPEC_JSON:
      {"tensors": {name: {"dtype": "F32"|"BF16"|"F16", "shape": [...], "seed": n}},
       "metadata": {...}}. Every element must equal formula(seed, i) converted to
      the dtype: F32 bit-exact, BF16 by round-to-nearest-even on the fp32 bits,
      F16 by numpy's astype(float16). Also checks the header padding and layout.
  safetensors_np.py write FILE SEED
      Writes the tensors hpod's test reads back (see write()).

formula() must match FormulaValue() in src/train/model/safetensors_test.cc: an
integer hash turned into fp32 bits with exponents 2^-30 .. 2^20, so the F16
cases cover zeros, subnormals, normals and overflow to inf.
"""
import json
import struct
import sys

import numpy as np

M32 = np.uint64(0xFFFFFFFF)


def formula(seed, n):
    i = np.arange(n, dtype=np.uint64)
    h = (i * np.uint64(2654435761) + np.uint64(seed * 40503 + 12345)) & M32
    h ^= h >> np.uint64(15)
    h = (h * np.uint64(2246822519)) & M32
    h ^= h >> np.uint64(13)
    sign = h >> np.uint64(31)
    mant = h & np.uint64(0x7FFFFF)
    exp = np.uint64(97) + ((h >> np.uint64(23)) & np.uint64(0x3F)) % np.uint64(51)
    bits = (sign << np.uint64(31)) | (exp << np.uint64(23)) | mant
    return bits.astype(np.uint32).view(np.float32)


def to_bf16_bits(f32):
    b = f32.view(np.uint32).astype(np.uint64)
    return (((b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16))
            & np.uint64(0xFFFF)).astype(np.uint16)


def encode(f32, dtype):
    if dtype == "F32":
        return f32.astype("<f4").tobytes()
    if dtype == "BF16":
        return to_bf16_bits(f32).astype("<u2").tobytes()
    if dtype == "F16":
        with np.errstate(over="ignore"):  # overflow to inf is the expected result
            return f32.astype(np.float16).view(np.uint16).astype("<u2").tobytes()
    raise ValueError(dtype)


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    return n, header, data[8 + n:]


def fail(msg):
    print("safetensors_np: " + msg)
    sys.exit(1)


def check(path, spec_json):
    spec = json.loads(spec_json)
    n, header, body = read(path)
    if n % 8 != 0:
        fail(f"header length {n} is not a multiple of 8")
    metadata = header.pop("__metadata__", {})
    if metadata != spec.get("metadata", {}):
        fail(f"metadata {metadata} != {spec.get('metadata', {})}")
    if set(header) != set(spec["tensors"]):
        fail(f"tensors {sorted(header)} != {sorted(spec['tensors'])}")
    spans = sorted(tuple(h["data_offsets"]) for h in header.values())
    pos = 0
    for b, e in spans:
        if b != pos:
            fail(f"data section has a gap or overlap at {b}")
        pos = e
    if pos != len(body):
        fail(f"data section is {len(body)} bytes, tensors end at {pos}")
    for name, want in spec["tensors"].items():
        h = header[name]
        if h["dtype"] != want["dtype"] or h["shape"] != want["shape"]:
            fail(f"{name}: {h['dtype']} {h['shape']} != {want['dtype']} {want['shape']}")
        count = int(np.prod(want["shape"], dtype=np.int64))
        expected = encode(formula(want["seed"], count), want["dtype"])
        b, e = h["data_offsets"]
        got = body[b:e]
        if got != expected:
            width = 4 if want["dtype"] == "F32" else 2
            for k in range(0, len(expected), width):
                if got[k:k + width] != expected[k:k + width]:
                    fail(f"{name}[{k // width}]: bytes {got[k:k + width].hex()} != "
                         f"{expected[k:k + width].hex()}")
            fail(f"{name}: {len(got)} bytes != {len(expected)}")
    print(f"OK {len(header)} tensors")


def write(path, seed):
    """f32/bf16/f16: formula(seed + k) in that dtype; f16_all: every half bit pattern and
    f16_all_f32 its numpy fp32 value; i64: [1, 2, 3] as I64; scalar: 1.5 as F32 with shape []."""
    all_half = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    tensors = [
        ("f32", "F32", [3, 5, 7], encode(formula(seed, 105), "F32")),
        ("bf16", "BF16", [4, 33], encode(formula(seed + 1, 132), "BF16")),
        ("f16", "F16", [2, 3, 50], encode(formula(seed + 2, 300), "F16")),
        ("f16_all", "F16", [65536], all_half.astype("<u2").tobytes()),
        ("f16_all_f32", "F32", [65536], all_half.view(np.float16).astype("<f4").tobytes()),
        ("i64", "I64", [3], np.array([1, 2, 3], dtype="<i8").tobytes()),
        ("scalar", "F32", [], np.array(1.5, dtype="<f4").tobytes()),
    ]
    header = {"__metadata__": {"format": "pt", "writer": "numpy"}}
    body = b""
    # Widest dtypes first keeps every tensor aligned, as the safetensors package does.
    width = {"I64": 0, "F32": 1, "BF16": 2, "F16": 2}
    for name, dtype, shape, raw in sorted(tensors, key=lambda t: width[t[1]]):
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)
    print(f"wrote {len(tensors)} tensors")


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        check(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "write":
        write(argv[2], int(argv[3]))
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
