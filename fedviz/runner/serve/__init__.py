"""Serving runs to the dashboard: the rooms a long-lived server process adds to running a job.

- :mod:`.manager`: :class:`~.manager.RunManager`, the queue, the cap on concurrent runs and the server's
  slots, the sessions and their reaper, and the process-wide manager (:func:`~.manager.get_manager`, which
  hands runs to the cluster's executor when ``FEDVIZ_DASK_SCHEDULER`` names a reachable cluster);
- :mod:`.handle`: :class:`~.handle.RunHandle`, the sink whose immutable snapshots a page reads;
- :mod:`.warmup`: compiling every kernel at server start (``python -m fedviz.runner.serve.warmup --measure``).

It sits at the top of :mod:`fedviz.runner`: above the execution modules, the history and the cluster.
"""
