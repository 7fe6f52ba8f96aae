"""The source of a toy runner plug-in module (a module named by ``FLB_RUNNER_MODULES``), shared by the tests that
load one in a Snakemake subprocess: the imports and the registration every toy job class needs are written once
here (issue 25); a test gives its job class and any imports of its own."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

_HEADER = """from dataclasses import dataclass
from typing import ClassVar

from benchmark.jobs import Job, register_job


@register_job
@dataclass(frozen=True)
"""


def plugin_module(job_class: str, imports: Sequence[str] = ()) -> str:
    """Python source of a module that registers the job class ``job_class`` (its ``class ...(Job):`` block, in
    any indentation) as a frozen dataclass, after ``imports``."""
    return "".join(f"{line}\n" for line in imports) + _HEADER + textwrap.dedent(job_class).lstrip("\n")
