"""The ReFrame library of the harness's checks (no test is registered here).

The check files in ``checks/`` import it as a package (installed, editable,
with the project); what does not need ReFrame is the core package
``harnesscore``, which the report imports too.  One module per concern:
``placement`` (the checks' parameters, the rounds' order, the plan of each
partition), ``plan`` (``python -m harnesslib.plan``), ``launch`` (each stack's
launcher and binding, the node lock, the MPI environment), ``build``
(``KernelBuild``, CMake or Spack), ``base`` (``RunBase`` and ``KernelCheck``:
references, perflog fields, provenance), ``noise`` (the reference bands and
the quiet-machine record as ReFrame hooks), ``compat`` (ReFrame's private
registry, behind a version guard).
"""
