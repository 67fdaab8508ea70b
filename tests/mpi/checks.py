"""What the tests/mpi/*.sh cases' embedded python shares (common.sh puts this directory on
PYTHONPATH): a check that fails the case with a line naming what went wrong."""
import sys


def check(cond, what):
    if not cond:
        sys.exit(f"FAIL: {what}")
