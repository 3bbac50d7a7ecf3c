#!/usr/bin/env python3
"""Writes an SPDX 2.3 JSON software bill of materials for one release artifact: the Rust
packages linked into a binary (the workspace package and everything it depends on at run
time for that target, from `cargo metadata` and Cargo.lock: no build needed), or a chart
and the images it runs.

    scripts/sbom.py binary --package mwrs-controller --target x86_64-unknown-linux-musl \\
        --artifact mwrs-controller-0.1.0-linux-amd64 --created 2026-12-07T00:00:00Z > x.spdx.json
    scripts/sbom.py chart --chart target/dist/mwrs-controller-0.1.0.tgz \\
        --image REGISTRY/mwrs-controller@sha256:... --created ... > chart.spdx.json

Reproducible: the document's namespace is derived from its content, and its time is
--created (the commit's)."""

import argparse
import hashlib
import json
import subprocess
import sys
import tomllib

TOOL = "Tool: mwrs scripts/sbom.py"


def spdx_id(name, version):
    safe = "".join(c if c.isalnum() or c in ".-" else "-" for c in f"{name}-{version}")
    return f"SPDXRef-Package-{safe}"


def lock_checksums():
    """name@version -> the sha256 Cargo.lock records for a registry package."""
    with open("Cargo.lock", "rb") as f:
        lock = tomllib.load(f)
    return {
        f"{p['name']}@{p['version']}": p["checksum"]
        for p in lock.get("package", [])
        if "checksum" in p
    }


def runtime_closure(meta, root_name):
    """The packages `root_name` links at run time: normal dependencies, transitively."""
    by_id = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next(p["id"] for p in meta["packages"] if p["name"] == root_name)
    seen, todo, edges = {root}, [root], []
    while todo:
        pid = todo.pop()
        for dep in nodes[pid]["deps"]:
            if not any(k["kind"] is None for k in dep["dep_kinds"]):
                continue
            edges.append((pid, dep["pkg"]))
            if dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    return root, [by_id[i] for i in sorted(seen)], edges, by_id


def package(p, checksums, workspace):
    key = f"{p['name']}@{p['version']}"
    out = {
        "SPDXID": spdx_id(p["name"], p["version"]),
        "name": p["name"],
        "versionInfo": p["version"],
        "downloadLocation": "NOASSERTION",
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": p.get("license") or "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "APPLICATION" if workspace else "LIBRARY",
        "externalRefs": [
            {
                "referenceCategory": "PACKAGE-MANAGER",
                "referenceType": "purl",
                "referenceLocator": f"pkg:cargo/{p['name']}@{p['version']}",
            }
        ],
    }
    if key in checksums:
        out["checksums"] = [{"algorithm": "SHA256", "checksumValue": checksums[key]}]
    return out


def document(name, created, packages, relationships):
    body = {"packages": packages, "relationships": relationships}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": name,
        "documentNamespace": f"https://spdx.org/spdxdocs/{name}-{digest}",
        "creationInfo": {"created": created, "creators": [TOOL]},
        "documentDescribes": [packages[0]["SPDXID"]],
        **body,
    }


def binary(a):
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", a.target],
            check=True,
            capture_output=True,
        ).stdout
    )
    members = set(meta["workspace_members"])
    root, closure, edges, by_id = runtime_closure(meta, a.package)
    checksums = lock_checksums()
    packages = [package(by_id[root], checksums, True)]
    packages += [package(p, checksums, p["id"] in members) for p in closure if p["id"] != root]
    rel = [
        {
            "spdxElementId": "SPDXRef-DOCUMENT",
            "relationshipType": "DESCRIBES",
            "relatedSpdxElement": packages[0]["SPDXID"],
        }
    ]
    for src, dst in sorted(set(edges)):
        s, d = by_id[src], by_id[dst]
        rel.append(
            {
                "spdxElementId": spdx_id(s["name"], s["version"]),
                "relationshipType": "DEPENDS_ON",
                "relatedSpdxElement": spdx_id(d["name"], d["version"]),
            }
        )
    return document(a.artifact, a.created, packages, rel)


def chart(a):
    with open(a.chart, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    name = a.chart.rsplit("/", 1)[-1].removesuffix(".tgz")
    top = {
        "SPDXID": "SPDXRef-Package-chart",
        "name": name,
        "downloadLocation": "NOASSERTION",
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": "Apache-2.0",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "INSTALL",
        "checksums": [{"algorithm": "SHA256", "checksumValue": sha}],
    }
    packages, rel = [top], [
        {"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
         "relatedSpdxElement": top["SPDXID"]}
    ]
    for i, image in enumerate(a.image or []):
        ref, _, digest = image.partition("@")
        pkg = {
            "SPDXID": f"SPDXRef-Package-image-{i}",
            "name": ref,
            "downloadLocation": "NOASSERTION",
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "Apache-2.0",
            "copyrightText": "NOASSERTION",
            "primaryPackagePurpose": "CONTAINER",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": f"pkg:oci/{ref.rsplit('/', 1)[-1]}@{digest}"}],
        }
        packages.append(pkg)
        rel.append({"spdxElementId": top["SPDXID"], "relationshipType": "DEPENDS_ON",
                    "relatedSpdxElement": pkg["SPDXID"]})
    return document(name, a.created, packages, rel)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="kind", required=True)
    b = sub.add_parser("binary")
    b.add_argument("--package", required=True)
    b.add_argument("--target", required=True)
    b.add_argument("--artifact", required=True)
    b.add_argument("--created", required=True)
    c = sub.add_parser("chart")
    c.add_argument("--chart", required=True)
    c.add_argument("--image", action="append")
    c.add_argument("--created", required=True)
    a = p.parse_args()
    doc = binary(a) if a.kind == "binary" else chart(a)
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
