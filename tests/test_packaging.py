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
