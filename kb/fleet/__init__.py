"""Fleet triage: every job under some folders -> one row each (kb's verdict, whose problem it is,
what to do, where and when it failed) -> a DuckDB table or Parquet file, and a summary.

  discover.py   which paths are jobs
  triage.py     the per-job function (path -> row); never raises
  local.py      a process pool over this machine's cores (the default engine)
  ray_engine.py the same function in Ray actors, for more than one machine (the only Ray import)
  store.py      DuckDB: the table, the faulty-node view, the summary's SQL (the only DuckDB import)
  meta.py       the scheduler's job records (--meta jobs.csv): GPUs, start, end, user
  summary.py    the summary as Rich tables
  cli.py        `kb triage`

Nothing here is imported by `import kb`: the fleet modules load only for `kb triage`.
"""
