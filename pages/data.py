"""Data: generate or upload a data set, choose its partition and test split, and look at it."""

import dataclasses

import streamlit as st

from fedviz import ui
from fedviz.markup import escape
from fedviz.data.build import (DEFAULT_TEST_FRACTION, MAX_NODES, PRESET_PREFIX, DataSpec, deal_sentence,
                               partition_words, unassigned_test_rows_possible)
from fedviz.data.labels import dataset_classes, dataset_label_counts
from fedviz.data.partition import PARTITION_SPEC, PARTITIONERS, parse_spec
from fedviz.data.presets import PRESETS, format_preset_spec, parse_preset_spec, preset_config, preset_params
from fedviz.data.settings import DATA_SETTINGS, settings_of, with_settings
from fedviz.data.synthetic import MAX_SEED
from fedviz.data.unseen import unseen_sentence
from fedviz.errors import ParameterError
from fedviz.learn.chart_notes import label_spread_note, node_majority_note, rare_features_note
from fedviz.params import parse_options
from fedviz.problems.losses import loss_for
from fedviz.problems.unseen import unseen_baselines
from fedviz.plots import feature_appearance_figure, node_size_figure
from fedviz.plots.label_figure import COLOURS, class_names, class_totals_figure, label_distribution_figure

ui.through_navigation()

#: Generator knobs shown on the page (others stay at the preset's values); their labels, help and
#: ranges are the generator's own (fedviz.data.synthetic's Params).
KNOBS = ("words_per_example", "zipf_exponent", "dirichlet_concentration", "node_bias_std", "label_noise",
         "alpha", "beta")

#: The index-base choices for uploads -> DataSpec.zero_based.
INDEX_BASES = {"auto": "auto", "0-based": True, "1-based": False}
#: The data settings drawn by a rule of their own below (shown only where they apply, or started from the
#: source's own value); every other setting of the table gets its Param's input (setting_widgets).  Each
#: input takes its label, help and range from the table (fedviz.data.settings), as the link and the command
#: line do.
OWN_INPUTS = ("partition", "nodes", "test_fraction", "split", "deal_test")
#: How a file without a test file is split (DataSpec.split), in words.
SPLITS = {"auto": "random within each node, stratified by label (qid files: in file order)",
          "random": "random within each node, stratified by label",
          "chronological": "the last rows of each node, in file order"}
SOURCES = ["Generate", "Upload a LIBSVM file"]
OWN = "the data's own nodes"
#: The label heatmap's colour choices (fedviz.plots.label_figure.COLOURS), in words.
COLOUR_WORDS = {"share": "share of the node's rows", "count": "rows"}
COLOUR_HELP = ("Share: each node's mix of classes, comparable between a node of 10 rows and one of 10,000. "
               "Rows: the counts themselves, as Flower's plot_label_distributions draws them; large nodes dominate.")


def _positive(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise ParameterError("positive class", text, "one of the file's labels (a number)") from None


def _labels_text(labels) -> str:
    if isinstance(labels, dict):
        return "Labels: " + "; ".join(f"{k} = {v}" for k, v in labels.items()) + "."
    return str(labels or "")


def generator_widgets(current: DataSpec) -> DataSpec:
    """The preset and its knobs.  Every widget key names the preset, so switching presets starts
    from the new preset's own knobs, and a preset chosen again starts from its defaults (or the
    link's values when the link named it)."""
    name0, over0 = parse_preset_spec(current.source[len(PRESET_PREFIX):]) if current.is_preset \
        else ("google-plus-small", {})
    names = list(PRESETS)
    name = st.selectbox("Preset", names, key=ui.seeded("data-preset", name0), help="\n\n".join(
        f"**{p.name}**: {p.description}" for p in PRESETS.values()))
    st.caption(PRESETS[name].description)
    base = preset_config(name)
    given = over0 if name == name0 else {}  # the config's overrides belong to its own preset only
    overrides = {}
    nodes = st.number_input("Nodes K", 1, MAX_NODES, key=ui.seeded(f"data-{name}-nodes",
                                                                     int(given.get("nodes", base.n_nodes))),
                            help="Number of devices holding the data.")
    if nodes != base.n_nodes:
        overrides["nodes"] = int(nodes)
    seed = st.number_input("Seed", 0, MAX_SEED, key=ui.seeded(f"data-{name}-seed", int(given.get("seed", 0))),
                           help="Seeds the generator: the same seed gives the same data set.")
    if seed:
        overrides["seed"] = int(seed)
    with st.expander("Generator knobs"):
        params = preset_params(name)
        knobs = [params[k] for k in (*KNOBS, "bias_feature") if k in params]
        overrides.update(ui.param_inputs(
            knobs, owner=name, start={k: v for k, v in given.items() if k in params},
            defaults={p.name: getattr(base, p.name) for p in knobs},
            key=lambda k: f"data-{name}-bias" if k == "bias_feature" else f"data-{name}-knob-{k}"))
    preset_config(name, **overrides)  # validate before building
    return DataSpec(source=PRESET_PREFIX + format_preset_spec(name, overrides))


def upload_widgets(current: DataSpec) -> DataSpec | None:
    """A training file (and an optional test file); None until a file is chosen."""
    up = st.file_uploader("Training file (LIBSVM / svmlight, optionally .gz, .bz2 or .xz)", key="upload-train",
                          help=f"At most {ui.MAX_UPLOAD_MB} MB (also once decompressed) and "
                               f"{ui.MAX_UPLOAD_ROWS:,} rows. The file is only parsed, never executed.")
    up_test = st.file_uploader("Test file (optional)", key="upload-test")
    wider = st.checkbox("Test file may be wider", key="upload-wider-test",
                        help="Accept a test file with features beyond the training file's last. Off, such a "
                             "file is refused, naming its line: it is usually another data set's test file.")
    task = st.radio("Task", ["auto", "classification", "regression"], horizontal=True, key="upload-task",
                    help="auto: real-valued labels mean regression (ridge), others classification.")
    index_base = st.radio("Feature indices", list(INDEX_BASES), horizontal=True, key="index-base",
                          help="auto: 0-based if some index is 0, else 1-based (as scikit-learn decides). "
                               "1-based refuses index 0 and names its line.")
    positive = st.text_input("Positive class (one-vs-rest, for files of more than two classes)",
                             key="upload-positive", placeholder="blank: the file's own classes (softmax beyond two)",
                             help="Blank: a file with more than two classes keeps every class, and the model is "
                                  "softmax regression. A class given: it becomes +1 and all others -1 "
                                  "(one-vs-rest), for the binary losses. Two-class files are binary either way.")
    if up is None:
        return None if current.is_preset else current
    # Bytes only: the upload's name is a label for messages, never a path.
    return DataSpec(source=up.getvalue(), name=up.name, test=None if up_test is None else up_test.getvalue(),
                    test_name=None if up_test is None else up_test.name, task=task, positive=_positive(positive),
                    zero_based=INDEX_BASES[index_base], max_rows=ui.MAX_UPLOAD_ROWS,
                    max_bytes=ui.MAX_UPLOAD_MB << 20, wider_test=bool(wider and up_test is not None))


def partition_widgets(current: DataSpec, same_source: bool) -> tuple[str | None, int | None]:
    """The partitioner, its own knobs and K; knob keys name the partitioner, as preset knobs do."""
    name0, given = parse_spec(current.partition) if current.partition and same_source else (OWN, {})
    options = [OWN] + list(PARTITIONERS)
    p = DATA_SETTINGS["partition"]
    choice = st.selectbox(p.shown_label, options, key=ui.seeded("data-partition", name0 if name0 in options else OWN),
                          format_func=lambda o: o if o == OWN else ui.partitioner_label(o), help=ui.param_help(p))
    if choice == OWN:
        return None, None
    cls = PARTITIONERS[choice]
    start = parse_options(cls.params, given, choice) if choice == name0 else {}
    changed = ui.param_inputs(cls.params.values(), owner=choice, start=start,
                              key=lambda pname: f"part-{choice}-{pname}")
    items = {pname: cls.params[pname].format(v) for pname, v in changed.items()}
    nodes = None
    if choice not in ("natural", "reshuffle"):  # these take their nodes from the data's groups
        p = DATA_SETTINGS["nodes"]
        nodes = st.number_input(p.shown_label, *p.bounds, placeholder="automatic", help=ui.param_help(p),
                                key=ui.seeded("data-part-nodes", current.nodes if same_source else None))
    return PARTITION_SPEC.join(choice, items), None if nodes is None else int(nodes)


def split_widgets(current: DataSpec, spec: DataSpec) -> DataSpec:
    """The test fraction (every source) and, for a file without a test file, how rows are drawn.

    None in the spec means the source's own fraction (a preset's, or 0.25 for a file), so a
    link carries the fraction only when the user changed it.  The widget's key names the
    preset (as its knobs do), so each preset shows its own fraction (fedprox-synthetic's 0.1,
    not the 0.25 of the preset before it); with a test file the fraction is moot and disabled."""
    if spec.is_preset:
        name = parse_preset_spec(spec.source[len(PRESET_PREFIX):])[0]
        own, key = preset_config(name).test_fraction, f"data-{name}-test-fraction"
        same = current.is_preset and parse_preset_spec(current.source[len(PRESET_PREFIX):])[0] == name
    else:
        own, key, same = DEFAULT_TEST_FRACTION, "data-file-test-fraction", not current.is_preset
    moot = spec.test is not None
    start = own if current.test_fraction is None or not same else float(current.test_fraction)
    p = DATA_SETTINGS["test_fraction"]
    fraction = st.number_input(p.shown_label, *p.bounds, step=0.05, format="%.2f", key=ui.seeded(key, start),
                               disabled=moot, help=ui.param_help(p))
    if moot:
        st.caption("Test fraction: not used — the test file is the test set, and every row of the training file "
                   "trains.")
        return dataclasses.replace(spec, test_fraction=None, split="auto")
    split = "auto"  # a preset splits by its generator's time order
    if not spec.is_preset:
        q = DATA_SETTINGS["split"]
        split = st.selectbox(q.shown_label, list(q.choices), format_func=SPLITS.get, help=ui.param_help(q),
                             key=ui.seeded("data-split", "auto" if current.is_preset else current.split))
    fraction = ui.checked(p, fraction)  # the widget's top, 1, is the one value its range leaves out
    return dataclasses.replace(spec, test_fraction=None if fraction == own else float(fraction), split=split)


def setting_widgets(current: DataSpec, spec: DataSpec) -> DataSpec:
    """The input of every data setting without a rule of its own (the data seed, the unseen share, and any
    setting the table gains), each its Param's (ui.param_input), started from the session's value and kept
    across sources.  Every input is drawn before an invalid one is raised."""
    start, values, invalid = settings_of(current), {}, None
    for p in DATA_SETTINGS.values():
        if p.name in OWN_INPUTS:
            continue
        try:
            values[p.name] = ui.param_input(p, key="data-" + p.name.replace("_", "-"), owner="", start=start[p.name])
        except ui.InvalidInput as e:
            invalid = e
    if invalid is not None:
        raise invalid
    return with_settings(spec, values)


def deal_widget(current: DataSpec, spec: DataSpec) -> DataSpec:
    """Whether test rows of no node are dealt to the nodes (DataSpec.deal_test), shown only where the test
    rows can belong to no node (a test file, a preset split into other nodes); elsewhere it is off."""
    if not unassigned_test_rows_possible(spec):
        return dataclasses.replace(spec, deal_test=False)
    deal = ui.param_input(DATA_SETTINGS["deal_test"], key="data-deal-test", owner="", start=bool(current.deal_test))
    return dataclasses.replace(spec, deal_test=deal)


st.title("Data")
config = ui.current_config()
ui.show_query_problems()
current = config.data

left, right = st.columns([1, 2], gap="large")
with left:
    kind = st.radio("Source", SOURCES, horizontal=True,
                    key=ui.seeded("data-source", SOURCES[0] if current.is_preset else SOURCES[1]))
    spec, invalid = None, False
    with ui.guard("Reading the settings"):
        try:
            spec = generator_widgets(current) if kind == SOURCES[0] else upload_widgets(current)
        except ui.InvalidInput:  # shown beneath its input; the session keeps its data set
            spec, invalid = None, True

    st.subheader("Partition and test set")
    same_source = spec is not None and spec.source == current.source
    with ui.guard("Reading the partition"):
        try:
            partition, part_nodes = partition_widgets(current, same_source)
        except ui.InvalidInput:  # shown beneath its input; the session keeps its data set
            spec, invalid = None, True
        if spec is not None:
            spec = dataclasses.replace(spec, partition=partition, nodes=part_nodes)
            for widgets in (split_widgets, setting_widgets, deal_widget):  # each drawn, whatever the one before held
                try:
                    spec = widgets(current, spec)
                except ui.InvalidInput:  # shown beneath its input; the session keeps its data set
                    invalid = True
            spec = None if invalid else spec

with right:
    if kind != SOURCES[0] and spec is None and not invalid:
        st.info("Upload a file to see its statistics. The current data set is unchanged.")
    else:
        with ui.guard("Building the data set"):
            chosen = current if spec is None else spec
            ds = ui.load_dataset(chosen)  # a bad file stops here: the session keeps its data set
            if chosen != current:
                ui.set_config(ui.with_data(config, chosen))
                config, current = ui.current_config(), chosen
            s = ds.stats.summary()
            st.subheader(escape(ds.meta.get("source", "")))  # an upload's name is its visitor's text
            ui.show_data_notes(ds)
            # Two a row: at 1024 px three columns cut a seven-digit count ("244,…").
            row1, row2, row3 = st.columns(2), st.columns(2), st.columns(2)
            row1[0].metric("examples n", f"{s['n']:,}")
            row1[1].metric("features d", f"{s['d']:,}")
            row2[0].metric("nonzeros", f"{s['nnz']:,}")
            held = ds.unseen.n_nodes if ds.unseen is not None else 0
            row2[1].metric("nodes K", f"{s['nodes']:,}" + (f" + {held:,} unseen" if held else ""))
            row3[0].metric("test examples", f"{ds.y_test.size:,}")
            if ds.task == "classification":
                row3[1].metric("classes", f"{ds.n_classes:,}")
            st.caption(f"Partition: {partition_words(ds)}. "
                       f"Test set: {ds.meta.get('split', 'its own')}. Node sizes n_k from {s['node_size_min']:,} "
                       f"to {s['node_size_max']:,} (median {s['node_size_median']:,.0f}). "
                       f"{rare_features_note(ds.stats.omega, ds.n_nodes)} {_labels_text(ds.meta.get('labels'))}")
            if ds.meta.get("dealt"):  # DataSpec.deal_test: said whenever it acts
                st.caption(deal_sentence(ds))
            if held:
                st.caption(unseen_sentence(ds) + " The figures on this page are the seen nodes'.")
            st.plotly_chart(feature_appearance_figure(ds.stats.omega, ds.n_nodes), width="stretch")
            a, b = st.columns(2)
            a.plotly_chart(node_size_figure(ds.node_sizes), width="stretch")
            if ds.task == "classification":
                counts, classes = dataset_label_counts(ds), dataset_classes(ds)
                # The heatmap below holds each node's mix (the former label-balance bars, for any C); beside the
                # sizes, the whole's mix it is compared with.
                b.plotly_chart(class_totals_figure(counts, classes), width="stretch")
                colour = st.radio("Colour the cells by", COLOURS, horizontal=True, key="data-label-colour",
                                  format_func=COLOUR_WORDS.get, help=COLOUR_HELP)
                st.plotly_chart(label_distribution_figure(counts, classes, ds.node_sizes, colour=colour),
                                width="stretch")
                st.caption(label_spread_note(counts, class_names(classes)))  # computed from the counts
                st.subheader("Baselines (Section 4.1)")
                base = ui.load_baselines(current)
                opt = ui.load_optimum(current, loss_for(config.loss, ds.multiclass), config.lam)
                table = {"predictor": ["predict the majority label", "per-node majority", "the optimum w*"],
                         "test error": [ui.fmt_pct(base.get("majority")), ui.fmt_pct(base.get("node_majority")),
                                        ui.fmt_pct(opt["test_error"])]}
                if held:  # the same predictors on the held-out nodes' test rows
                    problem = ui.load_problem(current, loss_for(config.loss, ds.multiclass), config.lam)
                    new = unseen_baselines(problem, opt["w"])
                    table["test error, seen nodes"] = table.pop("test error")
                    table["test error, unseen nodes"] = [ui.fmt_pct(new.get(k))
                                                         for k in ("majority", "node_majority", "optimum")]
                st.table(table)
                # Computed: the per-node majority against OPT, or why it is n/a (the test rows belong to no node).
                st.caption(node_majority_note(base.get("node_majority"), opt["test_error"],
                                              test_file=current.test is not None))
                st.caption(f"Optimum: f* = {opt['objective']:.10f}, ‖∇f(w*)‖ = {opt['grad_norm']:.1e}, "
                           f"λ = {opt['lam']:.3g}, {opt['seconds']:.2f} s (Newton-CG).")
        if spec is not None and spec != current:  # the new data failed to build (the error is above)
            st.caption("The current data set is unchanged.")

ui.sync_link()
