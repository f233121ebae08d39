"""The harness's core, free of ReFrame: what a record is and how it is judged.

Both stages that meet the records import it: the checks (``checks/``, with
their ReFrame library ``harnesslib``) that write them, and the report
(``reports/hybridverdict``) that reads them.  Nothing here imports ReFrame
(``tests/test_layering.py``).  One module per concern:

* ``schema``: the perflog schema, declared once (the configuration's perflog
  format, the checks' fields, the report's reader);
* ``stats``: the one decision rule (paired t interval, bands, sequential looks);
* ``bands``: the reference bands of a check's time and their judgement;
* ``references``: the per-system ``$ref`` files and how runs are keyed;
* ``rounds``: the rounds of a ring/OSU run inside one job
  (``python -m harnesscore.rounds``);
* ``quiet``: whether the node was quiet around a run
  (``python -m harnesscore.quiet``);
* ``osu_output``: OSU Micro-Benchmarks: where they are, their output parser;
* ``plan``: feasible layouts x sizes x samples of a node, the cost model,
  ``HARNESS_BUDGET``;
* ``units``: byte sizes and their labels;
* ``paths``: where the checkout's parts are;
* ``stacks``: the MPI stacks the harness knows, one entry each (how each is
  found, launched, bound, pinned to a link and recognised in a run);
* ``knobs``: every ``HARNESS_*`` knob, the one list ``./harness --help`` and
  the documentation print, and how list knobs are read.
"""
