"""The build step that ships the demo inside the wheel (everything else is in pyproject.toml).

The demo's personas, goals, budgets.toml and simrun.toml stay at the repository's top level,
where a clone runs them; a built wheel (or a `pip install git+...`) gets a copy of them in
`simrun/simulator/bundled/`, which `simrun.simulator._demo.folder()` finds when there is no clone around.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DEMO = ("personas", "goals", "budgets.toml", "simrun.toml")   # simrun.simulator._demo.FILES


class BuildWithDemo(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return   # an editable install reads the clone's own files
        target = Path(self.build_lib) / "simrun" / "simulator" / "bundled"
        for name in DEMO:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, target / name, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / name)


setup(cmdclass={"build_py": BuildWithDemo})
