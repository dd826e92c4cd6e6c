"""The labs' kits: what each labs notebook runs (its models, data and the harness that runs a
loop on them), one module per notebook (``labs_bug_hunts`` -> ``bug_hunts``). The checks that
judge a learner's fix are in ``amp_course.exercises``, in the module named after the notebook."""
