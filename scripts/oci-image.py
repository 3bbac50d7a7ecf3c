#!/usr/bin/env python3
"""Packs static binaries into a multi-platform OCI image, with no container engine and no
storage but the output directory: one layer per platform holding the binary and nothing
else, a config that runs it as a numeric non-root user, a manifest per platform and an
image index over them, written as an OCI image layout (and, with --archive, as the tar of
that layout, an `oci-archive:`).

Reproducible: every timestamp is --created, every owner is root, the gzip stream has no
name or time, and JSON is written with sorted keys, so the same binaries and arguments give
the same digests, byte for byte.

    scripts/oci-image.py --name mwrs-controller --version 0.1.0 --revision abc123 \\
        --created 2026-12-07T00:00:00Z --source https://example.org/repo \\
        --binary linux/amd64=target/x86_64-unknown-linux-musl/release/mwrs-controller \\
        --binary linux/arm64=target/aarch64-unknown-linux-musl/release/mwrs-controller \\
        --out target/image/mwrs-controller [--archive target/image/mwrs-controller.oci.tar]

Prints the index's digest. Labels follow the OCI image spec's annotation keys."""

import argparse
import calendar
import gzip
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import time

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
USER = "65532:65532"
DESCRIPTION = {
    "mwrs-controller": "ManifestWorkReplicaSet hub controller for Open Cluster Management, "
    "with revision history, automatic abort and undo",
    "mwrs-feedback-plugin": "The reference rollout plugin of the ManifestWorkReplicaSet "
    "controller: judges each cluster by its agent's feedback",
}


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Layout:
    """An OCI image layout being written: blobs by digest."""

    def __init__(self, root):
        self.root = root
        if os.path.exists(root):
            shutil.rmtree(root)
        os.makedirs(os.path.join(root, "blobs", "sha256"))

    def blob(self, data, media_type, **extra):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.root, "blobs", "sha256", digest[7:]), "wb") as f:
            f.write(data)
        return dict(mediaType=media_type, digest=digest, size=len(data), **extra)

    def finish(self, index_descriptor, ref):
        with open(os.path.join(self.root, "oci-layout"), "wb") as f:
            f.write(canonical({"imageLayoutVersion": "1.0.0"}))
        top = dict(index_descriptor)
        top["annotations"] = {"org.opencontainers.image.ref.name": ref}
        with open(os.path.join(self.root, "index.json"), "wb") as f:
            f.write(canonical({"schemaVersion": 2, "mediaType": INDEX, "manifests": [top]}))


def layer(binary, path_in_image, epoch):
    """The gzipped tar holding `binary` at `path_in_image` (mode 0555), and its diff id."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        parts = path_in_image.strip("/").split("/")
        for i in range(1, len(parts)):
            d = tarfile.TarInfo("/".join(parts[:i]) + "/")
            d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(d)
        with open(binary, "rb") as f:
            data = f.read()
        info = tarfile.TarInfo("/".join(parts))
        info.size, info.mode, info.mtime = len(data), 0o555, epoch
        tar.addfile(info, io.BytesIO(data))
    plain = raw.getvalue()
    zipped = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=zipped, mtime=0, compresslevel=9) as z:
        z.write(plain)
    return zipped.getvalue(), "sha256:" + hashlib.sha256(plain).hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--revision", required=True)
    p.add_argument("--created", required=True, help="RFC 3339, UTC (the commit's time)")
    p.add_argument("--source", default="unknown")
    p.add_argument("--binary", action="append", required=True, metavar="OS/ARCH=PATH")
    p.add_argument("--out", required=True, help="the OCI image layout directory to write")
    p.add_argument("--archive", help="also write the layout as a tar (an oci-archive)")
    a = p.parse_args()

    epoch = calendar.timegm(time.strptime(a.created, "%Y-%m-%dT%H:%M:%SZ"))
    entry = f"/usr/local/bin/{a.name}"
    labels = {
        "org.opencontainers.image.title": a.name,
        "org.opencontainers.image.description": DESCRIPTION.get(a.name, a.name),
        "org.opencontainers.image.version": a.version,
        "org.opencontainers.image.revision": a.revision,
        "org.opencontainers.image.created": a.created,
        "org.opencontainers.image.source": a.source,
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    out = Layout(a.out)
    manifests = []
    for spec in a.binary:
        platform, _, path = spec.partition("=")
        os_, _, arch = platform.partition("/")
        if not (os_ and arch and path):
            sys.exit(f"oci-image.py: --binary {spec!r}: expected OS/ARCH=PATH")
        blob, diff_id = layer(path, entry, epoch)
        config = {
            "architecture": arch,
            "os": os_,
            "created": a.created,
            "config": {"User": USER, "Entrypoint": [entry], "Labels": labels},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": a.created, "created_by": f"scripts/oci-image.py: {entry}"}],
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": out.blob(canonical(config), CONFIG),
            "layers": [out.blob(blob, LAYER)],
            "annotations": labels,
        }
        manifests.append(
            out.blob(canonical(manifest), MANIFEST, platform={"architecture": arch, "os": os_})
        )
    index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests, "annotations": labels}
    top = out.blob(canonical(index), INDEX)
    out.finish(top, a.version)
    if a.archive:
        with tarfile.open(a.archive, "w", format=tarfile.PAX_FORMAT) as tar:
            for dirpath, dirnames, filenames in os.walk(a.out):
                dirnames.sort()
                for name in sorted(filenames):
                    full = os.path.join(dirpath, name)
                    info = tar.gettarinfo(full, os.path.relpath(full, a.out))
                    info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
    print(top["digest"])


if __name__ == "__main__":
    main()
