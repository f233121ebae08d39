"""The ReFrame library of the harness's checks (no test is registered here).

The check files in ``checks/`` import it as a package (it is installed,
editable, with the project).  What does not need ReFrame (the record schema,
statistics, references, units, bands, rounds, the plan, knobs, stacks) is the
core package ``harnesscore``, which the report imports too.  One module per
concern here:

* ``placement``: the checks' parameters (layouts that fill a node, sizes,
  samples), point-to-point placement, the rounds' order (pairs side by side),
  the plan of each ReFrame partition;
* ``plan``: ``python -m harnesslib.plan``, the session's plan per partition of
  a ReFrame configuration;
* ``launch``: each stack's own launcher and binding, the node lock, the MPI
  environment a run inherits;
* ``build``: ``KernelBuild``, the build fixture (CMake or Spack);
* ``base``: ``SystemReferences``, ``PerflogFields``, ``Provenance`` and
  ``KernelCheck``, the base of every kernel run;
* ``noise``: the per-system reference bands and the quiet-machine record as
  ReFrame hooks;
* ``compat``: ReFrame's private registry, behind a version guard.
"""
