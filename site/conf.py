"""Sphinx configuration of the course's website (`make site`; amp_course.tooling.website writes
its pages).

The pages are notebooks that already ran (the tests' smoke run or the GPU run): MyST-NB renders
their outputs and never executes anything. Sphinx rather than Jupyter Book 2: the latter fetches
its theme template from the web at build time, so it cannot build offline.
"""

project = "amp-course"
author = "amp-course"
copyright = "amp-course contributors"

# MathJax for the lessons' $...$ and $$...$$ (JupyterLab and Colab render them too), from files
# copied into the site (sphinx-mathjax-offline), not from a CDN: the site reads the same offline.
extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx-mathjax-offline"]
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath"]
nb_execution_mode = "off"  # the executed copies are the pages; nothing runs a third time
nb_merge_streams = True  # one block per stream instead of one per print flush
# A cell's Markdown output (lesson 02's traced ops, lesson 08's per-seed accuracies) holds tables,
# which MyST parses and CommonMark, MyST-NB's default for outputs, prints as text.
nb_render_markdown_format = "myst"
exclude_patterns = ["notebooks/*"]  # the learners' notebooks, offered as downloads only
suppress_warnings = ["mystnb.unknown_mime_type"]

# Quotes as written: the quizzes' questions hold code (torch.autocast("cuda", ...)) outside code
# spans, and curly quotes would not run when a reader copies it.
smartquotes = False

html_theme = "sphinx_book_theme"
html_title = "amp-course"
html_static_path = ["_static"]
html_css_files = ["amp.css"]
html_js_files = ["amp.js"]  # a figure shown scaled down opens at full size on a click
html_show_sourcelink = False
html_use_index = False  # no index entries: the page would be empty
html_copy_source = False
html_theme_options = {
    "use_download_button": False,  # each lesson links the learner's notebook itself
    "use_fullscreen_button": False,
    "show_toc_level": 1,
    "navigation_with_keys": False,
}
