"""Atomic file writing has one home (`xla_costmodel._atomic`, issue 25 §4): a reader sees the old file or the
new one, never half of one, and no other module renames files into place itself."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from xla_costmodel._atomic import replacing, write_atomically

PACKAGE = Path(__file__).resolve().parents[1] / "xla_costmodel"


def test_a_new_file_is_written_with_the_usual_permissions(tmp_path):
    target = tmp_path / "deep" / "f.txt"
    assert write_atomically(target, "ü") == target
    assert target.read_bytes() == "ü".encode()
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's private 0600


def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    target.chmod(0o640)
    write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o640


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "f.parquet"
    target.write_text("old")

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with replacing(target, suffix=".tmp.parquet") as tmp:
            assert tmp.parent == tmp_path and tmp.name.endswith(".tmp.parquet")
            tmp.write_text("half")
            raise Boom
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.parquet"]


def test_a_failed_rename_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    target.write_text("old")

    def refuse(*_):
        raise OSError("read-only")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="read-only"):
        write_atomically(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_no_other_module_renames_files_into_place():
    """`os.replace`/`os.rename` and `tempfile.mkstemp` appear in `_atomic` alone."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_atomic.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename", "mkstemp") \
                    and isinstance(node.value, ast.Name) and node.value.id in ("os", "tempfile"):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, "write through xla_costmodel._atomic instead: " + "; ".join(found)
