from lab.config import ROOT
from lab.results.schema import COLUMNS


def test_every_runs_csv_column_is_documented():
    doc = (ROOT / "docs" / "results.md").read_text()
    missing = [c for c in COLUMNS if f"`{c}`" not in doc]
    assert not missing, f"docs/results.md does not document {missing}"


def test_readme_names_the_two_commands_and_ci_calls_the_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "bash scripts/setup.sh" in readme and "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
