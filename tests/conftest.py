"""The whole suite's plugins: tests/timing.py counts the timing checks (issue 27, 5)."""

pytest_plugins = ["tests.timing"]
