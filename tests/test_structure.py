"""The house's plan, held: pycore's stages import only earlier stages, and no function grows past a screen.

The stages and their order are docs/architecture.md's: base -> inputs -> model -> memory -> answers -> output.
Imports inside ``if TYPE_CHECKING:`` and inside functions count too: a late import is still a dependency.
"""

import ast
from pathlib import Path

import pytest

PYCORE = Path(__file__).resolve().parent.parent / "pycore"
STAGES = ("base", "inputs", "model", "memory", "answers", "output")
MAX_FUNCTION_LINES = 60


def _modules():
    return sorted(p for p in PYCORE.rglob("*.py") if p.parent != PYCORE)


def _imported(tree: ast.AST) -> "list[tuple[int, str]]":
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"line {node.lineno}: relative import; pycore imports by absolute name")
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found += [(node.lineno, n) for n in names if n.startswith("pycore.")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("pycore.")]
    return found


def test_every_module_is_in_a_stage():
    assert sorted(p.name for p in PYCORE.iterdir() if p.suffix == ".py") == ["__init__.py", "__main__.py"]
    assert sorted(p.name for p in PYCORE.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(STAGES)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PYCORE)))
def test_imports_point_at_earlier_stages(path):
    stage = STAGES.index(path.parent.name)
    for line, name in _imported(ast.parse(path.read_text(encoding="utf-8"))):
        target = name.split(".")[1]
        assert target in STAGES, f"{path.name}:{line} imports {name}, which is in no stage"
        assert STAGES.index(target) <= stage, (
            f"{path.relative_to(PYCORE)}:{line} imports {name}: stage {path.parent.name} may import only "
            f"{', '.join(STAGES[:stage + 1])}")


def test_the_import_check_can_fail():
    bad = ast.parse("from pycore.output.report import plural\n")
    assert [n for _, n in _imported(bad)] == ["pycore.output.report", "pycore.output.report.plural"]
    with pytest.raises(AssertionError):
        _imported(ast.parse("from .units import GIB\n"))


@pytest.mark.parametrize("path", sorted(PYCORE.rglob("*.py")), ids=lambda p: str(p.relative_to(PYCORE)))
def test_no_function_is_over_sixty_lines(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines, line {node.lineno})"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path.relative_to(PYCORE)}: {', '.join(long)}"
