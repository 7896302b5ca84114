"""A pytest plugin (pyproject.toml: -p fuzz_counts): the fuzz tests count the inputs they ran, and the
summary prints the count."""

FUZZ_RUNS: dict = {}


def count_fuzz(name: str) -> None:
    """One more generated input through ``name`` (web.run, web.answers, the CLI, config import)."""
    FUZZ_RUNS[name] = FUZZ_RUNS.get(name, 0) + 1


def pytest_terminal_summary(terminalreporter):
    if FUZZ_RUNS:
        counts = ", ".join(f"{name} {count}" for name, count in sorted(FUZZ_RUNS.items()))
        terminalreporter.write_line(f"fuzz inputs run: {counts} ({sum(FUZZ_RUNS.values())} in all)")
