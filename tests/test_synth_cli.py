"""``drtriton-train synth``: arguments, outputs, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("ortools")

from drtriton.ops import SYNTH_NAMES  # noqa: E402
from drtriton.training.cli import main, parse_ops  # noqa: E402


def _fails(argv, capsys, *needles):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    return err


def test_parse_ops():
    assert parse_ops("3") == [3]
    assert parse_ops("1-5") == [1, 2, 3, 4, 5]
    assert parse_ops(" 2 - 2 ") == [2]


@pytest.mark.parametrize("argv, needles", [
    (["--ops", "0"], ["at least 1 operator"]),
    (["--ops", "5-2"], ["5 > 2"]),
    (["--ops", "a"], ["K or K1-K2"]),
    (["--ops", "2", "-n", "-1"], ["must be >= 0"]),
    (["--ops", "2", "--min-flops", "1e6", "--max-flops", "1e3"], ["--min-flops", "larger than --max-flops"]),
    (["--ops", "2", "--max-flops", "2.5"], ["not an integer"]),
    (["--ops", "2", "--workers", "0"], ["must be >= 1"]),
])
def test_bad_arguments_exit_2(argv, needles, tmp_path, capsys):
    base = ["synth", "-n", "3", "--out", str(tmp_path / "out")]
    _fails(base + argv, capsys, *needles)


def test_output_dir_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("")
    _fails(["synth", "--ops", "1", "-n", "1", "--out", str(target)], capsys, "not a directory")


def test_infeasible_bound_names_the_constraint(tmp_path, capsys):
    # a 3-D convolution needs at least 2 FLOPs; no bound on any tensor can make 1 enough
    err = _fails(["synth", "--ops", "1", "-n", "1", "--max-flops", "1", "--min-flops", "0",
                  "--out", str(tmp_path / "o"), "-q"], capsys, "max_flops")
    assert "cannot fit" in err


def test_writes_programs_and_manifest(tmp_path, capsys):
    out = tmp_path / "synth"
    assert main(["synth", "--ops", "1-2", "-n", "6", "--seed", "3", "--out", str(out), "--workers", "1",
                 "--min-flops", "1e3", "--max-flops", "2e5", "-q"]) == 0
    lines = (out / "programs.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 6 and [r["k"] for r in records] == [1, 1, 1, 2, 2, 2]
    for r in records:
        assert set(r) >= {"id", "code", "ops", "k", "flops", "shapes"}
        assert 1_000 <= r["flops"] <= 200_000 and len(r["ops"]) == r["k"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["vocabulary"] == list(SYNTH_NAMES)
    assert (manifest["min_flops"], manifest["max_flops"], manifest["seed"], manifest["count"]) == (1_000, 200_000, 3, 6)
    assert sum(manifest["histogram"].values()) == 9 and set(manifest["histogram"]) == set(SYNTH_NAMES)
    assert set(manifest["per_k"]) == {"1", "2"}


def test_console_script_runs(tmp_path):
    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "drtriton.training.cli", "synth", "--ops", "1", "-n", "2",
                           "--out", str(out), "--workers", "1", "--max-flops", "1e5"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "[synth] 2/2 programs" in proc.stderr  # the progress bar goes to stderr
    assert len((out / "programs.jsonl").read_text().splitlines()) == 2


def test_bounds_defaults():
    from drtriton.training.synth.config import MAX_FLOPS, MAX_NUMEL, MIN_FLOPS, Bounds, ConfigError

    assert Bounds.make() == Bounds(MIN_FLOPS, MAX_FLOPS, MAX_NUMEL, 4096)
    assert Bounds.make(max_flops=1000) == Bounds(10, 1000, 1000, 4096)  # room below, small tensors
    assert Bounds.make(min_flops=10**9).max_flops == 10**11
    with pytest.raises(ConfigError, match="larger than"):
        Bounds.make(5, 4)


def test_hopeless_bounds_fail_fast_with_the_constraint():
    """Every operator fits alone, but no five fit in 4 FLOPs: generation stops and says why."""
    from drtriton.training.synth.config import Bounds
    from drtriton.training.synth.generate import SynthesisError, generate

    with pytest.raises(SynthesisError, match="infeasible constraints: .*max_flops"):
        generate(3, [5], 0, Bounds.make(0, 4))


@pytest.mark.parametrize("argv, needles", [
    (["--stages", "0"], ["--stages 0", "at least one operator"]),
    (["--stages", "1,x"], ["--stages 1,x", "numbers of operators"]),
    (["--time-limit", "0"], ["must be > 0"]),
    (["--time-limit", "soon"], ["not a number of seconds"]),
])
def test_bad_training_arguments_exit_2(argv, needles, tmp_path, capsys):
    pytest.importorskip("trl")
    _fails(["drpo", "--recipe", "tiny", "--small", "--device", "cpu", "--out", str(tmp_path / "o")] + argv, capsys,
           *needles)
