#!/usr/bin/env python3
"""Pack one static binary, or a root directory, into an OCI image archive that `ctr images
import` reads.

    oci-archive.py <binary> <reference> <entrypoint path in the image> <output.tar> [ENV=VALUE ...]
    oci-archive.py --rootfs <dir> <reference> <output.tar> <entrypoint> [CMD ARG ...]

The first form: a single uncompressed layer holding the binary (mode 0755) and nothing else
(no shell, no libc: the binary must be static). The second: a single layer holding the
directory as it is (files, directories and symlinks with their modes, owned by root), the
entrypoint and the default command (`Cmd`) as given. The archive is an OCI image layout (oci-layout,
index.json, blobs/sha256/...) whose index names the image by its full reference, so the import
keeps it as given (e.g. registry.k8s.io/pause:3.10.2). Used by scripts/provision-node; the
standard library only, and the output is byte-for-byte reproducible (fixed mtimes, sorted keys).
"""
import hashlib
import io
import json
import os
import sys
import tarfile


def add_bytes(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def rootfs_layer(root):
    """A tar of everything under root, sorted, with fixed owners and mtimes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
        paths = []
        for parent, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(dirs + files):
                paths.append(os.path.join(parent, name))
        for path in sorted(paths):
            info = layer.gettarinfo(path, arcname=os.path.relpath(path, root))
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isfile():
                with open(path, "rb") as f:
                    layer.addfile(info, f)
            else:
                layer.addfile(info)
    return buf.getvalue()


def main():
    if len(sys.argv) >= 6 and sys.argv[1] == "--rootfs":
        root, reference, output, entrypoint = sys.argv[2:6]
        layer_bytes = rootfs_layer(root)
        image_config = {"Entrypoint": [entrypoint], "Cmd": sys.argv[6:], "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
    elif len(sys.argv) >= 5 and sys.argv[1] != "--rootfs":
        binary, reference, entrypoint, output = sys.argv[1:5]
        with open(binary, "rb") as f:
            program = f.read()
        layer_buf = io.BytesIO()
        with tarfile.open(fileobj=layer_buf, mode="w", format=tarfile.PAX_FORMAT) as layer:
            add_bytes(layer, entrypoint.lstrip("/"), program, 0o755)
        layer_bytes = layer_buf.getvalue()
        image_config = {"Entrypoint": [entrypoint], "Env": sys.argv[5:]}
    else:
        sys.exit(__doc__)

    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [blob(layer_bytes)]},
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": blob(config_bytes),
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": blob(layer_bytes),
                "size": len(layer_bytes),
            }
        ],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": blob(manifest_bytes),
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": reference,
                    "org.opencontainers.image.ref.name": reference,
                },
            }
        ],
    }
    with tarfile.open(output, mode="w", format=tarfile.PAX_FORMAT) as out:
        add_bytes(out, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add_bytes(out, "index.json", json.dumps(index, sort_keys=True).encode())
        for data in (layer_bytes, config_bytes, manifest_bytes):
            add_bytes(out, "blobs/sha256/" + hashlib.sha256(data).hexdigest(), data)


if __name__ == "__main__":
    main()
