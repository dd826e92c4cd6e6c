"""Reference solutions, one module per lesson module (``SOLUTIONS = {name: answer}``).

The grading sandbox hides this folder, so learner code there cannot import or read it; the
grader imports it in its own process to compute reference observations.
"""
