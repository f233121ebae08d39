"""hybridverdict: turn the harness's ReFrame perflogs into verdicts.

Where does hybrid MPI+OpenMP win, lose or tie against pure MPI at equal cores,
per kernel, problem size, MPI stack and interconnect (ReFrame partition)?

Modules:
  perflog   read ReFrame filelog perflogs robustly into records
  runreport read ReFrame JSON run reports into the same records
  verdict   pair hybrid runs with pure-MPI runs and judge them against the noise
  phases, spmv_model, overlap   the MD phase table, Chow & Hysom, Rabenseifner
  hockney   least-squares Hockney and log2 n fits (Xu & Hwang)
  comm      Hockney fits per stack, ring saturation, stack comparison, ring vs OSU,
            collectives
  history   each performance variable over time with its reference band
  glance    heatmap grids (layouts x sizes) and sentences on where hybrid wins
  section   what an analysis returns (Section) and the section and figure keys
  sections  the registry of analyses (ANALYSES), each records in, its Section out
  report    everything one report holds, built once
  render    terminal and Markdown summaries, verdict JSON
  plots     matplotlib figures (Agg, PNG data URIs); html: the self-contained page
  tidy      the tidy table: Parquet (CSV, JSON); write: every output as new files
  atomic    new files written whole (temp file, fsync, link), never over another
  store     the history store: records ingested once (Parquet parts), read lazily
  bench     time a full report from a large synthetic perflog
  cli       the ``hybridverdict`` command
"""

__version__ = '0.1.0'
