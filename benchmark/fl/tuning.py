"""Moved to :mod:`benchmark.apps.tuning` (issue 10: applications apart from the library). This alias keeps old
imports and ``python -m benchmark.fl.tuning`` working until every caller names the new module."""

import sys

from benchmark.apps import tuning as _moved

if __name__ == "__main__":
    sys.exit(_moved.main())
sys.modules[__name__] = _moved
