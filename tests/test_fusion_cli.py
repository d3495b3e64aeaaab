"""`xla-costmodel fuse`: step log, output file (accepted by XLA's parser), refusals."""

from __future__ import annotations

import json
import shutil

import pytest

from xla_costmodel import _jaxlib_oracle as oracle
from xla_costmodel.cli import main
from xla_costmodel.models import model_names

from conftest import FIXTURES

SRC = FIXTURES / "layernorm_softmax.pre.hlo"
MODEL = "xla-gpu" if "xla-gpu" in model_names() else "roofline"


def test_fuse_writes_module_and_prints_steps(tmp_path, capsys):
    out = tmp_path / "fused.hlo"
    assert main(["fuse", str(SRC), "--device", "h100-sxm", "--model", MODEL, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "producer" in text and "priority_us" in text and f"wrote {out}" in text
    assert "35 -> 5 kernels" in text  # kernels as analyze counts them (bitcast-like reshapes are free)
    oracle.xla_parse(out.read_text())
    assert "fusion(" in out.read_text()


def test_fuse_json(tmp_path, capsys):
    out = tmp_path / "fused.hlo"
    assert main(["fuse", str(SRC), "--model", MODEL, "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["kernels_after"] == 5 and data["summary"]["output"] == str(out)
    assert {"step", "producer", "consumers", "priority_s", "time_unfused_s", "time_fused_s", "reason"} <= set(data["steps"][0])
    assert isinstance(data["rejected"], list)


def test_fuse_refuses_to_overwrite_its_input(tmp_path, capsys):
    src = tmp_path / "in.hlo"
    shutil.copy(SRC, src)
    before = src.read_text()
    assert main(["fuse", str(src), "--model", MODEL, "-o", str(src)]) == 2
    assert "input file" in capsys.readouterr().err
    # also through another spelling of the same path
    assert main(["fuse", str(src), "--model", MODEL, "-o", str(tmp_path / "." / "in.hlo")]) == 2
    assert src.read_text() == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "nope"], "unknown cost model"),
        (["--device", "nope"], "unknown device"),
    ],
)
def test_fuse_bad_options(tmp_path, capsys, argv, message):
    assert main(["fuse", str(SRC), "-o", str(tmp_path / "o.hlo"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.hlo").exists()


def test_fuse_missing_input(tmp_path, capsys):
    assert main(["fuse", str(tmp_path / "missing.hlo"), "-o", str(tmp_path / "o.hlo")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_fuse_output_is_written_whole_and_needs_its_directory(tmp_path, capsys):
    """The module goes through a temporary file and a rename (nothing else left in the directory);
    a missing directory is a usage error, not a traceback."""
    out = tmp_path / "fused.hlo"
    out.write_text("an older file")
    assert main(["fuse", str(SRC), "--model", MODEL, "-o", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fused.hlo"]
    oracle.xla_parse(out.read_text())
    capsys.readouterr()
    assert main(["fuse", str(SRC), "--model", MODEL, "-o", str(tmp_path / "nodir" / "o.hlo")]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_fuse_no_simplify(tmp_path, capsys):
    """`--no-simplify` fuses the module as written (`simulate_fusion(simplify=False)`): transformer_fwd's Q, K
    and V projections stay three dots; the input priced is the same either way."""
    from xla_costmodel import simulate_fusion
    from xla_costmodel.hlo import load_hlo

    src = FIXTURES / "transformer_fwd.pre.hlo"
    runs = {}
    for flags in ([], ["--no-simplify"]):
        assert main(["fuse", str(src), "--model", MODEL, "-o", str(tmp_path / "o.hlo"), "--json", *flags]) == 0
        runs[bool(flags)] = json.loads(capsys.readouterr().out)["summary"]
    assert runs[True]["kernels_before"] == runs[False]["kernels_before"]
    for off in (True, False):
        want = simulate_fusion(load_hlo(src), device="h100-sxm", model=MODEL, simplify=not off)
        assert runs[off]["kernels_after"] == want.kernels_after
    assert runs[True]["kernels_after"] != runs[False]["kernels_after"]
