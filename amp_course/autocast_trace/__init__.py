"""Trace the dtype each op runs in under autocast; compare it with the op lists autocast applies.

One module per concern: ``op_lists`` (the lists torch registers for CUDA and CPU autocast, as
data, and ``autocast_policy``), ``docs_page`` (PyTorch's documentation page of those lists and
what it leaves out), ``registry`` (what the installed torch's dispatcher says about an op),
``recorder`` (the dispatch mode that records each aten op with its dtypes, and
``trace_op_dtypes``) and ``compare`` (the expected dtype of each op, disagreements with the
lists, and the table a lesson displays). Everything public is re-exported here, so
``ac.autocast_trace.trace_op_dtypes`` is the name a notebook uses.
"""

from .compare import VIEW_OPS, compare_with_lists, expected_dtype, summarise, summary_markdown
from .docs_page import DOCS_PAGE_OPS, DOCS_URL, PAGE_NAME_TO_ATEN, docs_page_gaps, docs_page_stale
from .op_lists import ATEN_TO_DOCUMENTED, AUTOCAST_OPS, POLICIES, autocast_policy
from .recorder import DtypeRecorder, TracedOp, trace_op_dtypes
from .registry import autocast_keys, drift_from_lists

__all__ = [
    "ATEN_TO_DOCUMENTED",
    "AUTOCAST_OPS",
    "DOCS_PAGE_OPS",
    "DOCS_URL",
    "PAGE_NAME_TO_ATEN",
    "POLICIES",
    "DtypeRecorder",
    "TracedOp",
    "VIEW_OPS",
    "autocast_keys",
    "autocast_policy",
    "compare_with_lists",
    "docs_page_gaps",
    "docs_page_stale",
    "drift_from_lists",
    "expected_dtype",
    "summarise",
    "summary_markdown",
    "trace_op_dtypes",
]
