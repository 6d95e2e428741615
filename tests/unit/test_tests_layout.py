"""The test suite's own layout: helpers live in tests/support*.py (and tests/ui/support.py),
never in a test module another test module imports."""

from __future__ import annotations

import ast

from tests.support import ROOT

TESTS = ROOT / "tests"


def _imported_modules(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return found


def test_no_test_module_is_imported_as_a_fixture_library():
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        for module in _imported_modules(ast.parse(path.read_text(), name)):
            if module.startswith("tests.") and module.rsplit(".", 1)[-1].startswith("test_"):
                offenders.append(f"{name} imports {module}")
    assert not offenders, "move what is shared into a tests/support*.py module:\n" + "\n".join(
        offenders
    )


def test_population_configs_are_loaded_from_tests_configs():
    """Every config under tests/configs/ is a population some test loads by name."""
    from tests.support_populations import CONFIGS, population_config

    sources = "".join(p.read_text() for p in TESTS.rglob("*.py"))
    for path in sorted(CONFIGS.glob("*.yaml")):
        assert population_config(path.stem)["name"], path
        assert f'"{path.stem}"' in sources, f"{path.name} is loaded by no test"
