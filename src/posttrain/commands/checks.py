"""Checks of command-line input that run before any long work: value ranges as typer callbacks
(a bad value is a one-line usage error, exit 2), and paths and ports as one-line PosttrainErrors."""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from pathlib import Path

import typer

from posttrain.errors import PosttrainError


def positive(value):
    """A number that must be > 0 (timeouts, CPU shares, limits): 0 would mean no time or no room."""
    if value is not None and value <= 0:
        raise typer.BadParameter(f"must be greater than 0 (got {value})")
    return value


def probability(value):
    """A value in (0, 1], such as top_p."""
    if value is not None and not 0 < value <= 1:
        raise typer.BadParameter(f"must be in (0, 1] (got {value})")
    return value


def fraction(value):
    """A value in [0, 1], such as a threshold on rewards."""
    if value is not None and not 0 <= value <= 1:
        raise typer.BadParameter(f"must be in [0, 1] (got {value})")
    return value


def port(value):
    if value is not None and not 1 <= value <= 65535:
        raise typer.BadParameter(f"must be a TCP port in 1..65535 (got {value})")
    return value


def port_is_free(host: str, number: int) -> None:
    """Bind and release host:number, so a busy port fails before a model is loaded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, number))
        except OSError as e:
            why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be bound ({e.strerror})"
            raise PosttrainError(f"port {number} on {host} {why}; pick another with --port") from None


def existing_dir(path: Path | str, what: str) -> Path:
    """A directory that must exist (a file there is an error, not a directory of one)."""
    p = Path(path)
    if p.is_file():
        raise PosttrainError(f"{what} {p} is a file; a directory is expected")
    if not p.is_dir():
        raise PosttrainError(f"{what} {p} does not exist")
    return p


def writable_dir(path: Path | str, what: str) -> Path:
    """A directory that will be written into: created if missing, refused if it is a file or
    read-only (checked by writing a probe file, which works for root and read-only mounts alike)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PosttrainError(f"{what} {p} is a file; a directory is expected")
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".write-probe-"):
            pass
    except OSError as e:
        raise PosttrainError(f"{what} {p} is not writable ({e.strerror or e})") from None
    return p


def writable_file(path: Path | str, what: str) -> Path:
    """A file that will be written: its directory must be writable; a directory there is an error."""
    p = Path(path)
    if p.is_dir():
        raise PosttrainError(f"{what} {p} is a directory; a file path is expected")
    writable_dir(p.parent if str(p.parent) else Path(os.curdir), f"the directory of {what}")
    return p
