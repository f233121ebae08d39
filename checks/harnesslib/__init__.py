"""The library of the harness's ReFrame checks (no test is registered here).

The check files in ``checks/`` import it as a package (it is installed,
editable, with the project).  One module per concern:

* ``schema``: the perflog schema, declared once (also read by
  ``config/settings.py`` and ``hybridverdict.perflog``);
* ``placement``: topology, the R x T layouts that fill a node, the checks'
  sizes, point-to-point placement, the rounds of every run (pairs side by side);
* ``plan``: the session's plan per partition: feasible layouts x sizes x
  samples, the cost model, ``HARNESS_BUDGET`` (``python -m harnesslib.plan``);
* ``launch``: each stack's own launcher and binding, the node lock;
* ``build``: ``KernelBuild``, the build fixture (CMake or Spack);
* ``references``: the per-system ``$ref`` files and how runs are keyed;
* ``osu_output``: OSU Micro-Benchmarks: where they are, their output parser;
* ``base``: ``SystemReferences``, ``PerflogFields`` and ``KernelCheck``, the
  base of every kernel run;
* ``paths``: where the checkout's parts are;
* ``stats``: the one decision rule (paired t interval, bands, sequential looks);
* ``compat``: ReFrame's private registry, behind a version guard.
"""
