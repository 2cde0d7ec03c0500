"""A sweep point's key: its fields, and the contents of the files it reads.

A point names a hardware profile file or a custom topology file (a fitted ``hardware.yaml``
or ``topology.yaml`` among them) by its path. Its key, what ``--resume`` matches saved rows
by, also carries the SHA-256 digest of each such file's bytes, so a row computed from the
file as it was is computed again once the file changes. A point that names only bundled
profiles, presets and builders reads no file: its key is the digest of its fields alone,
as before files were keyed, so existing results folders and reports keep their keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from atpsim.compute.hardware import profile_file
from atpsim.topology.spec import topology_file
from atpsim.yamlfile import file_digest

#: Hex digits of the SHA-1 of a point's canonical JSON that make its key.
KEY_HEX_DIGITS = 16


def point_files(topology: str | Mapping[str, Any], hardware: str) -> tuple[str, ...]:
    """The files a point on *topology* with *hardware* reads, in that order (none for
    bundled presets, builders and profiles)."""
    found = (topology_file(topology), profile_file(hardware))
    return tuple(path for path in found if path is not None)


def file_contents(topology: str | Mapping[str, Any], hardware: str) -> dict[str, str | None]:
    """Each file of :func:`point_files` -> the digest of its bytes (None: no file there)."""
    return {path: file_digest(path) for path in point_files(topology, hardware)}


def point_key(fields: Mapping[str, Any], topology: str | Mapping[str, Any], hardware: str) -> str:
    """The key of a point whose canonical JSON is *fields*: the first :data:`KEY_HEX_DIGITS`
    hex digits of its SHA-1, with ``contents`` (:func:`file_contents`) added to *fields*
    where the point reads a file."""
    contents = file_contents(topology, hardware)
    keyed = {**fields, "contents": contents} if contents else dict(fields)
    return hashlib.sha1(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:KEY_HEX_DIGITS]
