"""The scripts of tools/ as modules, for the tests that exercise them or share their definitions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def tool(name: str) -> ModuleType:
    """tools/`name`.py, loaded as a module (tools/ is not a package: its scripts run as files)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parents[1] / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"tools/{name}.py is missing"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
