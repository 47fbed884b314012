"""Decodes a tfevents file with the real protobuf runtime; the check for tfevents_test.

usage: tfevents_decode.py EVENTS_FILE PROTO_FILE
Verifies every record's framing and masked CRC-32Cs with python3-crc32c, parses
each Event with protoc-generated classes (python3-protobuf), and prints JSON:
[{"wall_time", "step", "file_version" | "values": [[tag, simple_value], ...]}, ...],
non-finite simple_values as the strings "inf", "-inf", "nan".
Exits 2 with a message on a bad record.
"""
import importlib
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import crc32c


def masked(data):
    crc = crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def number(x):
    # JSON has no inf/nan: spell them as Python does.
    return x if math.isfinite(x) else repr(x)


def records(blob):
    pos = 0
    while pos < len(blob):
        if pos + 12 > len(blob):
            print("truncated header at %d" % pos, file=sys.stderr)
            sys.exit(2)
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (len_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if len_crc != masked(header):
            print("bad length crc at %d" % pos, file=sys.stderr)
            sys.exit(2)
        data = blob[pos + 12:pos + 12 + length]
        if len(data) != length or pos + 16 + length > len(blob):
            print("truncated record at %d" % pos, file=sys.stderr)
            sys.exit(2)
        (data_crc,) = struct.unpack("<I", blob[pos + 12 + length:pos + 16 + length])
        if data_crc != masked(data):
            print("bad data crc at %d" % pos, file=sys.stderr)
            sys.exit(2)
        yield data
        pos += 16 + length


def main():
    events_file, proto_file = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        proto_dir, proto_name = os.path.split(os.path.abspath(proto_file))
        subprocess.run(["protoc", "-I", proto_dir, "--python_out", tmp, proto_name], check=True)
        sys.path.insert(0, tmp)
        pb = importlib.import_module(proto_name[:-len(".proto")] + "_pb2")
    with open(events_file, "rb") as f:
        blob = f.read()
    out = []
    for data in records(blob):
        event = pb.Event()
        event.ParseFromString(data)
        entry = {"wall_time": event.wall_time, "step": event.step}
        if event.WhichOneof("what") == "file_version":
            entry["file_version"] = event.file_version
        else:
            entry["values"] = [[v.tag, number(v.simple_value)] for v in event.summary.value]
        out.append(entry)
    json.dump(out, sys.stdout)


main()
