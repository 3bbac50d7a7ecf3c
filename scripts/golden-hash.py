#!/usr/bin/env python3
"""Independent reference for the revision hash (rules §4), used to pin golden vectors in
crates/engine/src/hash.rs. Usage: golden-hash.py '<json>' [collisionCount]"""
import json
import struct
import sys

ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def fnv1a32(data: bytes, h: int = 0x811C9DC5) -> int:
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def revision_hash(obj, collision_count: int = 0) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    h = fnv1a32(canonical.encode("utf-8"))
    if collision_count > 0:
        h = fnv1a32(struct.pack("<I", collision_count) + b"\0\0\0\0", h)
    return "".join(ALPHABET[ord(d) % 27] for d in str(h))


if __name__ == "__main__":
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    print(revision_hash(json.loads(sys.argv[1]), count))
