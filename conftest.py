"""Root of the test suite: every test lives under tests/ (see README, "Tests").

Fixtures shared by more than one test tree live in tests/support/fixtures.py,
registered here; helpers live in the other modules of tests/support.
"""

pytest_plugins = ["tests.support.fixtures"]
