"""The pipeline's folders are its stages, in order; no stage imports a later one, and
the bottom modules every stage shares (marks, notation, isl helpers, errors) import no
stage but the first (the core ops)."""

import ast
from pathlib import Path

import polyc

STAGES = ["frontend", "scop", "fusion", "scheduler", "tiling", "codegen", "runtime"]
BOTTOM = ["marks", "notation", "islutil", "errors", "config", "strategies", "options",
          "host"]
ROOT = Path(polyc.__file__).parent


def imported(path: Path) -> set[str]:
    """The polyc modules ``path`` imports (at any depth of its code)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {name for name in found if name.startswith("polyc.")}


def stage_of(module: str) -> str | None:
    part = module.split(".")[1]
    return part if part in STAGES else None


def test_no_stage_imports_a_later_one():
    later = []
    for stage in STAGES:
        for path in sorted((ROOT / stage).rglob("*.py")):
            for module in imported(path):
                other = stage_of(module)
                if other is not None and STAGES.index(other) > STAGES.index(stage):
                    later.append(f"{path.relative_to(ROOT)} imports {module}")
    assert later == []


def test_the_bottom_modules_import_no_stage_but_the_core_ops():
    found = [f"{name}.py imports {module}" for name in BOTTOM
             for module in imported(ROOT / f"{name}.py")
             if stage_of(module) is not None and not module.startswith("polyc.frontend.core")]
    assert found == []
