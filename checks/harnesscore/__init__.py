"""The harness's core, free of ReFrame: what a record is and how it is judged.

Both stages that meet the records import it: the checks (``checks/``, with
their ReFrame library ``harnesslib``) that write them, and the report
(``reports/hybridverdict``) that reads them.  Nothing here imports ReFrame
(``tests/test_layering.py``).  One module per concern: ``schema`` (the
perflog schema, declared once), ``stats`` (the one decision rule), ``bands``
(fixed-band references and their judgement), ``references`` (the per-system
``$ref`` files), ``rounds`` (alternating rounds inside one job), ``quiet``
(whether the node was quiet around a run), ``kernel_output`` (the kernels'
``RESULT`` lines), ``osu_output`` (OSU's tables),
``plan`` (what runs on a node within ``HARNESS_BUDGET``), ``units``,
``paths``, ``stacks`` (the MPI stacks, one entry each) and ``knobs`` (every
``HARNESS_*`` knob).
"""
