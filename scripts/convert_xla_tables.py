"""Convert XLA's measured GPU tables into the project's data files.

XLA publishes two tables of times measured on real GPUs:

- `xla/service/gpu/model/default_matmul_perf_table.txtpb` (proto
  `xla.GemmPerfTable`): achieved FLOP/s of single dots `[b,m,k] x [b,k,n]`
  per (b, m, n, k) and dtype combination, per GPU;
- `xla/service/gpu/model/default_collective_perf_table.txtpb` (proto
  `xla.gpu.DeviceHloInstructionProfiles`): the network throughput of
  all-reduce, all-gather, reduce-scatter, all-to-all and collective-permute
  over transfer sizes and device groups, per GPU.

Older XLA trees embed the same text protos in `matmul_interpolator_data.h` /
`collective_interpolator_data.h` (raw strings); both forms are read.

This script reads them from a local XLA checkout (a work tree, or a git
directory with a commit) and writes only the numbers, as CSV, under
`xla_costmodel/devices/data/xla_tables/`, with `PROVENANCE.json` naming the
repository, paths, commit, commit date and licence. The package reads the CSV
files (`xla_costmodel.devices.gemm_table`, `collective_table`).

    python scripts/convert_xla_tables.py --git-dir XLA/.git --commit 6b73c4c49eb0
    python scripts/convert_xla_tables.py --checkout XLA_WORK_TREE

Run it again to refresh the tables; the files are rewritten atomically.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL_DIR = "xla/service/gpu/model"
SOURCES = {
    "gemm": (f"{MODEL_DIR}/default_matmul_perf_table.txtpb", f"{MODEL_DIR}/matmul_interpolator_data.h"),
    "collective": (f"{MODEL_DIR}/default_collective_perf_table.txtpb", f"{MODEL_DIR}/collective_interpolator_data.h"),
}
OUT_DIR = Path(__file__).resolve().parent.parent / "xla_costmodel" / "devices" / "data" / "xla_tables"

GEMM_COLUMNS = ["table_key", "b", "m", "n", "k", "dtype_key", "flops_per_s"]
COLLECTIVE_COLUMNS = [
    "table_key", "opcode", "element_type", "dimensions", "channel_id", "use_global_device_ids",
    "num_replica_groups", "num_devices_per_group", "iota_reshape_dims", "iota_transpose_perm",
    "source_target_pairs", "network_throughput_bytes_per_s",
]


class TableError(Exception):
    """The input is not what this script understands (named with its place)."""


# ---------------------------------------------------------------------------
# Protocol-buffer text format, read into nested dicts of lists.
#
# The two tables use a small part of the format: `name: scalar`, `name { ... }`,
# quoted strings, enum identifiers and `#` comments. Without the compiled
# message classes `google.protobuf.text_format` cannot read them, so this
# reader keeps every field as a list of values (fields may repeat) and leaves
# the meaning to the converters below.

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\]|\\.)*")
      | (?P<punct>[{}:<>\[\],;])
      | (?P<word>[A-Za-z0-9_.+\-]+)
    )""",
    re.VERBOSE,
)


def _tokens(text: str, name: str):
    pos = 0
    n = len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            return
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            line = text.count("\n", 0, pos) + 1
            raise TableError(f"{name}:{line}: cannot read text proto near {text[pos:pos + 30]!r}")
        pos = m.end()
        if m.group("comment"):
            continue
        kind = m.lastgroup
        yield kind, m.group(kind), m.start()


def parse_text_proto(text: str, name: str = "<text>") -> dict:
    """A text-format message as `{field: [value, ...]}`; sub-messages are dicts, scalars strings."""
    stream = list(_tokens(text, name))
    pos = 0

    def where(offset: int) -> int:  # the line number, counted only for an error message
        return text.count("\n", 0, offset) + 1

    def message(closing: str | None) -> dict:
        nonlocal pos
        fields: dict[str, list] = {}
        while pos < len(stream):
            kind, value, at = stream[pos]
            if kind == "punct" and value == closing:
                pos += 1
                return fields
            if kind != "word":
                raise TableError(f"{name}:{where(at)}: expected a field name, got {value!r}")
            pos += 1
            if pos >= len(stream):
                raise TableError(f"{name}:{where(at)}: field {value!r} has no value")
            kind2, value2, at2 = stream[pos]
            if kind2 == "punct" and value2 == ":":
                pos += 1
                kind2, value2, at2 = stream[pos]
            if kind2 == "punct" and value2 in "{<":
                pos += 1
                sub = message("}" if value2 == "{" else ">")
                fields.setdefault(value, []).append(sub)
            elif kind2 == "string":
                fields.setdefault(value, []).append(bytes(value2[1:-1], "utf-8").decode("unicode_escape"))
                pos += 1
            elif kind2 == "word":
                fields.setdefault(value, []).append(value2)
                pos += 1
            else:
                raise TableError(f"{name}:{where(at2)}: field {value!r} has no value (got {value2!r})")
            if pos < len(stream) and stream[pos][0] == "punct" and stream[pos][1] in ",;":
                pos += 1
        if closing is not None:
            raise TableError(f"{name}: unexpected end of text inside a message")
        return fields

    return message(None)


def _one(fields: dict, key: str, default=None):
    values = fields.get(key)
    if not values:
        return default
    return values[-1]  # a repeated scalar written twice: the last one wins, as in protobuf


def _map_entries(fields: dict, key: str = "entries") -> list[tuple[str, dict]]:
    return [(_one(e, "key", ""), _one(e, "value", {})) for e in fields.get(key, [])]


# ---------------------------------------------------------------------------
# Converters: one CSV row per measurement, the numbers as XLA stores them.


def gemm_rows(doc: dict, name: str) -> list[dict]:
    rows = []
    for table_key, values in _map_entries(doc):
        if not table_key:
            raise TableError(f"{name}: a device entry has no key")
        for i, entry in enumerate(values.get("entries", [])):
            dims = {d: int(_one(entry, d, 0)) for d in ("b", "m", "n", "k")}
            if min(dims.values()) <= 0:
                raise TableError(f"{name}: {table_key} entry {i} has a non-positive dimension: {dims}")
            for dtype_key, flops in _map_entries(entry, "flops"):
                rows.append({"table_key": table_key, **dims, "dtype_key": dtype_key.lower(),
                             "flops_per_s": int(flops)})
    return rows


def _ints(values) -> str:
    return " ".join(str(int(v)) for v in values)


def collective_rows(doc: dict, name: str) -> list[dict]:
    rows = []
    for table_key, values in _map_entries(doc):
        for i, entry in enumerate(values.get("entries", [])):
            instr = _one(entry, "instruction", {})
            shape = _one(instr, "shape", {})
            devices = _one(instr, "iota_collective_device_list")
            # Unset proto3 fields read as 0 (a pair `{ target: 1 }` is 0 -> 1).
            pairs = [(int(_one(p, "source", 0)), int(_one(p, "target", 0)))
                     for p in instr.get("source_target_pairs", [])]
            rows.append({
                "table_key": table_key,
                "opcode": _one(instr, "opcode", ""),
                "element_type": str(_one(shape, "element_type", "")).lower(),
                "dimensions": _ints(shape.get("dimensions", [])),
                "channel_id": int(_one(instr, "channel_id", 0)),
                "use_global_device_ids": _one(instr, "use_global_device_ids", "false") == "true",
                "num_replica_groups": int(_one(devices, "num_replica_groups", 0)) if devices else "",
                "num_devices_per_group": int(_one(devices, "num_devices_per_group", 0)) if devices else "",
                "iota_reshape_dims": _ints(devices.get("iota_reshape_dims", [])) if devices else "",
                "iota_transpose_perm": _ints(devices.get("iota_transpose_perm", [])) if devices else "",
                "source_target_pairs": " ".join(f"{s}>{t}" for s, t in pairs),
                "network_throughput_bytes_per_s": int(_one(entry, "network_throughput_bytes_per_sec", 0)),
            })
            if not rows[-1]["opcode"]:
                raise TableError(f"{name}: {table_key} entry {i} has no opcode")
    return rows


# ---------------------------------------------------------------------------
# Reading the sources


def _embedded_text_proto(header: str, name: str) -> str:
    m = re.search(r'R"pb\((.*?)\)pb"', header, re.S)
    if m is None:
        raise TableError(f"{name}: no R\"pb(...)pb\" raw string with the table")
    return m.group(1)


class Source:
    """A local XLA tree: a work tree, or a git directory at a commit."""

    def __init__(self, checkout: str | None, git_dir: str | None, commit: str | None):
        self.checkout = Path(checkout) if checkout else None
        self.git_dir = git_dir
        self.commit = commit
        if self.checkout is None and not (git_dir and commit):
            raise TableError("give --checkout DIR, or --git-dir DIR with --commit REV")
        if self.checkout is not None and not self.checkout.is_dir():
            raise TableError(f"{self.checkout}: no such directory")

    def _git(self, *args: str) -> str:
        git_dir = self.git_dir or str(self.checkout / ".git")
        proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise TableError(f"git {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
        return proc.stdout

    def read(self, path: str) -> str | None:
        if self.checkout is not None:
            p = self.checkout / path
            return p.read_text(encoding="utf-8") if p.is_file() else None
        try:
            return self._git("show", f"{self.commit}:{path}")
        except TableError:
            return None

    def revision(self) -> tuple[str | None, str | None]:
        """`(full commit id, commit date ISO 8601)`, or Nones when the work tree is not a git checkout."""
        try:
            rev = self.commit or "HEAD"
            out = self._git("log", "-1", "--format=%H %cI", rev).split()
            return out[0], out[1]
        except (TableError, OSError):
            return None, None

    def table(self, kind: str) -> tuple[str, str]:
        """`(path read, text proto)` of one table: the .txtpb, else the older header."""
        txtpb, header = SOURCES[kind]
        text = self.read(txtpb)
        if text is not None:
            return txtpb, text
        text = self.read(header)
        if text is not None:
            return header, _embedded_text_proto(text, header)
        raise TableError(f"neither {txtpb} nor {header} is in this XLA tree")


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp creates it private; these are package data files
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _csv(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def convert(source: Source, out_dir: Path, repository: str) -> dict:
    commit, date = source.revision()
    provenance = {
        "repository": repository,
        "commit": commit,
        "commit_date": date,
        "licence": "Apache-2.0 (the files carry the OpenXLA Authors' Apache License 2.0 header)",
        "converted_by": "scripts/convert_xla_tables.py",
        "note": "Measurements only: the numbers of XLA's tables, one CSV row per measured point.",
        "tables": {},
    }
    for kind, rows_of, columns in (("gemm", gemm_rows, GEMM_COLUMNS),
                                   ("collective", collective_rows, COLLECTIVE_COLUMNS)):
        path, text = source.table(kind)
        doc = parse_text_proto(text, path)
        rows = rows_of(doc, path)
        if not rows:
            raise TableError(f"{path}: no measurements found")
        file_name = f"{kind}.csv"
        _write_atomic(out_dir / file_name, _csv(rows, columns))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["table_key"]] = counts.get(r["table_key"], 0) + 1
        provenance["tables"][kind] = {"file": file_name, "path": path, "rows": len(rows), "rows_per_key": counts}
    _write_atomic(out_dir / "PROVENANCE.json", json.dumps(provenance, indent=1) + "\n")
    return provenance


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", help="an XLA work tree")
    p.add_argument("--git-dir", help="an XLA git directory (bare or .git), with --commit")
    p.add_argument("--commit", help="the commit to read (with --git-dir; default HEAD of --checkout)")
    p.add_argument("--repository", default="openxla/xla", help="the repository to record (default openxla/xla)")
    p.add_argument("--out", default=str(OUT_DIR), help="output folder (default: the package's data folder)")
    args = p.parse_args(argv)
    try:
        prov = convert(Source(args.checkout, args.git_dir, args.commit), Path(args.out), args.repository)
    except (TableError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for kind, t in prov["tables"].items():
        keys = ", ".join(f"{k}: {n}" for k, n in t["rows_per_key"].items())
        print(f"{kind}: {t['rows']} rows from {t['path']} ({keys})")
    print(f"commit {prov['commit']} ({prov['commit_date']}) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
