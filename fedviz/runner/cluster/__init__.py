"""The Dask side of the runner, in rooms by job; this front door names what the rest of fedviz uses.

- :mod:`.client`: which cluster (an embedded TLS :class:`~distributed.LocalCluster`, or the scheduler of
  ``FEDVIZ_DASK_SCHEDULER``), who may use it, and the bounded connect.
- :mod:`.check`: whether its scheduler and workers run this fedviz (:func:`check_cluster`).
- :mod:`.stream`: the wire: a run's sink calls numbered, streamed as JSON events and replayed once each.
- :mod:`.worker`: the tasks a worker runs (:func:`run_job` through the same
  :func:`~fedviz.runner.execute.execute` a Run click uses; :func:`optimum_of`) and their Stop.
- :mod:`.executor`: :class:`DaskExecutor`, which hands an ordinary run to the cluster, and
  :func:`scatter_uploads`, which sends an upload's bytes once.

fedviz never schedules anything itself: Dask places the tasks, moves the data, and runs a task again
elsewhere when its worker dies (the replay then skips the calls it has applied).
"""

from __future__ import annotations

from .client import (CONNECT_TIMEOUT_ENV, INSECURE_ENV, PINNED, SCHEDULER_ENV, WORKERS_ENV, check_address,
                     client_security, close, connect_timeout, describe_cluster, get_client, probe_scheduler,
                     scheduler_address)
from .check import ClusterMismatch, check_cluster, environment, probe
from .executor import DaskExecutor, scatter_uploads, to_run_job
from .stream import (NODE_STREAM_VALUES, STREAM_INTERVAL, Recorder, Replay, decode_calls, encode_calls, node_stride,
                     subscribe, unsubscribe)
from .worker import STOP_POLL, optimum_of, run_job

__all__ = ["CONNECT_TIMEOUT_ENV", "ClusterMismatch", "DaskExecutor", "INSECURE_ENV", "NODE_STREAM_VALUES", "PINNED",
           "Recorder", "Replay", "SCHEDULER_ENV", "STOP_POLL", "STREAM_INTERVAL", "WORKERS_ENV", "check_address",
           "check_cluster", "client_security", "close", "connect_timeout", "decode_calls", "describe_cluster",
           "encode_calls", "environment", "get_client", "node_stride", "optimum_of", "probe", "probe_scheduler",
           "run_job", "scatter_uploads", "scheduler_address", "subscribe", "to_run_job", "unsubscribe"]
