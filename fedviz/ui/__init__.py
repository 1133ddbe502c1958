"""The Streamlit adapter: the only package of fedviz that imports streamlit.  The pages (``pages/*.py``)
and ``app.py`` use it as ``from fedviz import ui`` and call the names below; each lives in the room of its job:

- :mod:`.state`: the session, its :class:`~fedviz.runner.config.RunConfig` (the one source of truth of
  every page) and the link, who the session is and whether it is the operator;
- :mod:`.page`: what every page does — run inside app.py's navigation, the warm-up banner, the error guard
  that turns every exception into a message instead of a traceback, the notes of a configuration or a data set;
- :mod:`.loaders`: the cached loaders (keyed by content: data sets and problems are one read-only object
  shared by every session asking for the same content, optima and baselines copies), built in the
  server's run slots;
- :mod:`.widgets`: the inputs generated from parameter metadata;
- :mod:`.live`: the live run view (a fragment that redraws every 0.5 s from the run manager's snapshot);
- :mod:`.pernode`: the Run page's "Every node" section, drawn inside the live view;
- :mod:`.sessions`: Streamlit's sessions after their tab closed (installed by ``app.py``).
"""

from .live import (LIVE_INTERVAL, LIVE_MARKERS, LIVE_POINTS, QUEUED_INTERVAL, axis_controls, live_view,
                   show_slow_run_warnings, start_run)
from .loaders import (MAX_DATA_ENTRIES, MAX_EXPERIMENT_CELLS, MAX_PERSONAL, MAX_UPLOAD_MB, MAX_UPLOAD_ROWS,
                      SLOT_INTERVAL, load_baselines, load_dataset, load_optimum, load_personal, load_problem,
                      max_data_entries, max_experiment_cells, personal_ready, personal_unseen, session_ended,
                      slot_wait_text)
from .page import (WARM_UP_INTERVAL, guard, show_cluster_note, show_data_notes, start_warm_up,
                   through_navigation, warm_up_banner, warm_up_text)
from .pernode import warn_few_test_rows
from .state import (announce_operator, claim_operator, current_config, history_viewer, manager, seeded,
                    session_connected, session_id, set_config, show_query_problems, sync_link, with_data)
from .widgets import (InvalidInput, algorithm_choices, algorithm_label, algorithm_widgets, checked, fmt_pct,
                      left_out_text, param_help, param_input, param_inputs, partitioner_label, show_left_out)

__all__ = ["LIVE_INTERVAL", "LIVE_MARKERS", "LIVE_POINTS", "QUEUED_INTERVAL", "axis_controls", "live_view",
           "show_slow_run_warnings", "start_run", "MAX_DATA_ENTRIES", "MAX_EXPERIMENT_CELLS", "MAX_PERSONAL",
           "MAX_UPLOAD_MB", "MAX_UPLOAD_ROWS", "SLOT_INTERVAL", "load_baselines", "load_dataset",
           "load_optimum", "load_personal", "load_problem", "max_data_entries", "max_experiment_cells",
           "personal_ready", "personal_unseen", "session_ended", "slot_wait_text", "WARM_UP_INTERVAL", "guard",
           "show_cluster_note", "show_data_notes", "start_warm_up", "through_navigation", "warm_up_banner",
           "warm_up_text", "announce_operator", "claim_operator", "current_config", "history_viewer", "manager",
           "seeded", "session_connected", "session_id", "set_config",
           "show_query_problems", "sync_link", "with_data", "InvalidInput", "algorithm_choices",
           "algorithm_label", "algorithm_widgets", "checked", "fmt_pct", "left_out_text", "param_help",
           "param_input", "param_inputs", "partitioner_label", "show_left_out", "warn_few_test_rows"]
