"""pytest set-up for tests/python: the `long` marker (exhaustive sweeps, run by make test-long)."""


def pytest_configure(config):
    config.addinivalue_line("markers", "long: exhaustive sweeps excluded from make test")
