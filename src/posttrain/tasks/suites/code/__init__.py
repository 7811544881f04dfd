"""The code suite: bug fixes and write-from-scratch tasks in a real package from PyPI, graded by hidden tests."""
