"""Trace the dtype each op runs in under autocast; compare it with PyTorch's documented op lists.

One module per concern: ``op_lists`` (the documented lists as data, and ``documented_policy``),
``recorder`` (the dispatch mode that records each aten op with its dtypes, and
``trace_op_dtypes``) and ``compare`` (the expected dtype of each op, disagreements with the docs,
and the table a lesson displays). Everything public is re-exported here, so
``ac.autocast_trace.trace_op_dtypes`` is the name a notebook uses.
"""

from .compare import compare_with_docs, expected_dtype, summarise, summary_markdown
from .op_lists import ATEN_TO_DOCUMENTED, DOCS_URL, DOCUMENTED_OPS, documented_policy
from .recorder import DtypeRecorder, TracedOp, trace_op_dtypes

__all__ = [
    "ATEN_TO_DOCUMENTED",
    "DOCS_URL",
    "DOCUMENTED_OPS",
    "DtypeRecorder",
    "TracedOp",
    "compare_with_docs",
    "documented_policy",
    "expected_dtype",
    "summarise",
    "summary_markdown",
    "trace_op_dtypes",
]
