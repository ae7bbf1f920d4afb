"""The installed package holds every subpackage: `pip install .` (not editable) gets the whole
tree, which pyproject.toml lists by hand because server/ and training/ map into drtriton."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_directory_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if "node_modules" in init.parts:
                continue
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *rel)))
    assert found <= listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"


def test_the_shipped_problem_sets_are_package_data_and_match_kernelbench():
    """KernelBench Levels 1 and 2 ship inside the package, with their licence, and are the
    same problems as the reference copy."""
    from drtriton.problem import SHIPPED_SETS, load_problems

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "data/kernelbench/*" in config["package-data"]["drtriton"]
    folder = ROOT / "drtriton" / "data" / "kernelbench"
    assert "MIT License" in (folder / "LICENSE").read_text()
    for name, path in SHIPPED_SETS.items():
        problems = load_problems(name)
        assert len(problems) == 100 and path.parent == folder
        shared = ROOT.parent / "shared" / "data" / "kernelbench" / path.name
        if shared.is_file():
            assert path.read_text() == shared.read_text()


def test_the_readme_and_the_product_point_nowhere_outside_the_repository():
    for path in [ROOT / "README.md", ROOT / "docs" / "method.md", *(ROOT / "drtriton").rglob("*.py"),
                 *(ROOT / "server").rglob("*.py"), *(ROOT / "training").rglob("*.py")]:
        assert "../shared" not in path.read_text(), path


def test_training_eval_takes_the_shipped_kernelbench_without_a_path():
    from drtriton.problem import KERNELBENCH_DIR
    from drtriton.training.cli import build_parser

    args = build_parser().parse_args(["eval", "--recipe", "tiny", "--init", "m", "--out", "o", "--kernelbench"])
    assert args.kernelbench == KERNELBENCH_DIR and (KERNELBENCH_DIR / "level1.jsonl").is_file()
    args = build_parser().parse_args(["eval", "--recipe", "tiny", "--init", "m", "--out", "o", "--kernelbench", "kb"])
    assert args.kernelbench == Path("kb")
