"""The history of runs and experiments: one SQLite file behind one connection.

- :mod:`.store`: :class:`~.store.RunStore`, the schema and its one chain of migrations, the runs and
  their records, the owners and their heartbeats, the sessions, the CSV / JSON export and import;
- :mod:`.experiment_store`: the experiments' and cells' queries (:class:`~.experiment_store.ExperimentTables`,
  which ``RunStore`` inherits);
- :mod:`.journal`: :class:`~.journal.Journal`, the sink that writes a running job's records into the store;
- :mod:`.describe`: a run's settings in the words a person reads;
- :mod:`.stamps`: what every row is stamped with (the time, a browser session's keyed token).

It sits above the execution modules of :mod:`fedviz.runner` (it stores their records and reads their
configs) and below the cluster and the serving rooms, which write through it.  Nothing is imported
here, so that importing one module of the history does not import the others.
"""
