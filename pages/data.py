"""Data: generate or upload a data set, choose its partition, and look at it."""

import dataclasses

import numpy as np
import streamlit as st

from fedviz import ui
from fedviz.data.build import MAX_NODES, PRESET_PREFIX, DataSpec
from fedviz.data.partition import PARTITIONERS
from fedviz.data.synthetic import MAX_SEED
from fedviz.data.presets import PRESETS, format_preset_spec, parse_preset_spec, preset_config
from fedviz.errors import ParameterError
from fedviz.plots import feature_appearance_figure, label_balance_figure, node_size_figure

ui.through_navigation()

#: Generator knobs shown on the page (others stay at the preset's values).
KNOBS = {
    "words_per_example": ("words per example", "Mean number of distinct words in a post."),
    "zipf_exponent": ("Zipf exponent", "Word frequencies fall as rank^-s."),
    "dirichlet_concentration": ("topic concentration (non-IID)", "Dirichlet concentration of each node's topic "
                                "mixture: small = each node writes about few topics (strongly non-IID)."),
    "node_bias_std": ("per-node label bias", "Spread of the nodes' label log-odds: large = some nodes almost "
                      "always get comments, others never."),
    "label_noise": ("label noise", "Probability that a label is flipped."),
    "alpha": ("α (model heterogeneity)", "FedProx Synthetic(α, β): how much the nodes' models differ."),
    "beta": ("β (data heterogeneity)", "FedProx Synthetic(α, β): how much the nodes' inputs differ."),
}

#: The index-base choices for uploads -> DataSpec.zero_based.
INDEX_BASES = {"auto": "auto", "0-based": True, "1-based": False}


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


st.title("Data")
config = ui.current_config()
ui.show_query_problems()
current = config.data

left, right = st.columns([1, 2], gap="large")
with left:
    kind = st.radio("Source", ["Generate", "Upload a LIBSVM file"], horizontal=True,
                    index=0 if current.is_preset else 1)
    spec = None
    with ui.guard("Reading the settings"):
        if kind == "Generate":
            name0, over0 = parse_preset_spec(current.source[len(PRESET_PREFIX):]) if current.is_preset \
                else ("google-plus-small", {})
            names = list(PRESETS)
            name = st.selectbox("Preset", names, index=names.index(name0), help="\n\n".join(
                f"**{p.name}**: {p.description}" for p in PRESETS.values()))
            st.caption(PRESETS[name].description)
            base = preset_config(name)
            overrides = {}
            nodes = st.number_input("Nodes K", 1, MAX_NODES, int(over0.get("nodes", base.n_nodes)) if name == name0
                                    else int(base.n_nodes), help="Number of devices holding the data.")
            if nodes != base.n_nodes:
                overrides["nodes"] = int(nodes)
            seed = st.number_input("Seed", 0, MAX_SEED, int(over0.get("seed", 0)) if name == name0 else 0)
            if seed:
                overrides["seed"] = int(seed)
            with st.expander("Generator knobs"):
                fields = {f.name for f in dataclasses.fields(base)}
                for key, (label, help_text) in KNOBS.items():
                    if key not in fields:
                        continue
                    default = float(getattr(base, key))
                    value = st.number_input(label, value=float(over0.get(key, default)) if name == name0 else default,
                                            min_value=0.0, help=help_text, key=f"knob-{key}")
                    if value != default:
                        overrides[key] = value
                bias = st.checkbox("bias feature (constant 1)", value=bool(base.bias_feature),
                                   help="The paper's extra feature that plays the intercept.")
                if bias != base.bias_feature:
                    overrides["bias_feature"] = bias
            preset_config(name, **overrides)  # validate before building
            spec = DataSpec(source=PRESET_PREFIX + format_preset_spec(name, overrides))
        else:
            up = st.file_uploader("Training file (LIBSVM / svmlight, optionally .gz, .bz2 or .xz)",
                                  key="upload-train",
                                  help=f"At most {ui.MAX_UPLOAD_MB} MB (also once decompressed) and "
                                       f"{ui.MAX_UPLOAD_ROWS:,} rows. The file is only parsed, never executed.")
            up_test = st.file_uploader("Test file (optional)", key="upload-test")
            task = st.radio("Task", ["auto", "classification", "regression"], horizontal=True,
                            help="auto: real-valued labels mean regression (ridge), others classification.")
            index_base = st.radio("Feature indices", list(INDEX_BASES), horizontal=True, key="index-base",
                                  help="auto: 0-based if some index is 0, else 1-based (as scikit-learn "
                                       "decides). 1-based refuses index 0 and names its line.")
            positive = st.text_input("Positive class (multiclass files only)", "",
                                     help="With more than two classes, this class becomes +1 and all others -1.")
            if up is not None:
                # Bytes only: the upload's name is a label for messages, never a path.
                spec = DataSpec(source=up.getvalue(), name=up.name,
                                test=None if up_test is None else up_test.getvalue(),
                                test_name=None if up_test is None else up_test.name,
                                task=task, positive=_positive(positive), zero_based=INDEX_BASES[index_base],
                                max_rows=ui.MAX_UPLOAD_ROWS, max_bytes=ui.MAX_UPLOAD_MB << 20)
            elif not current.is_preset:
                spec = current

    st.subheader("Partition")
    own = "the data's own nodes"
    options = [own] + list(PARTITIONERS)
    part0 = (current.partition or "").split(":")[0] if spec is not None and spec.source == current.source else ""
    choice = st.selectbox("How the rows are split over nodes", options,
                          index=options.index(part0) if part0 in options else 0,
                          format_func=lambda o: o if o == own else f"{PARTITIONERS[o].title} ({o})",
                          help="The generator's nodes are users (natural, non-IID). Reshuffle keeps each node's "
                               "size but fills it with random rows: the paper's FSVRGR.")
    partition, part_nodes = None, None
    if choice != own:
        cls = PARTITIONERS[choice]
        items = []
        for pname, p in cls.params.items():
            if p.kind is bool:
                v = st.checkbox(pname, value=p.default, help=p.help, key=f"part-{choice}-{pname}")
            elif p.kind is int:
                v = int(st.number_input(pname, value=int(p.default), step=1, help=p.help, key=f"part-{choice}-{pname}"))
            else:
                v = float(st.number_input(pname, value=float(p.default), help=p.help, format="%g",
                                          key=f"part-{choice}-{pname}"))
            if v != p.default:
                items.append(f"{pname}={p.format(v)}")
        partition = choice + (":" + ",".join(items) if items else "")
        if choice not in ("natural", "reshuffle"):
            part_nodes = int(st.number_input("Nodes for the partition", 1, MAX_NODES, int(current.nodes or 100)))

    if spec is not None:
        # The partitioner's seed has no widget here: keep the one the session (or its link) chose.
        spec = dataclasses.replace(spec, partition=partition, nodes=part_nodes, seed=current.seed)

with right:
    if kind != "Generate" and spec is None:
        st.info("Upload a file to see its statistics. The current data set is unchanged.")
    else:
        with ui.guard("Building the data set"):
            chosen = current if spec is None else spec
            ds = ui.load_dataset(chosen)  # a bad file stops here: the session keeps its data set
            if chosen != current:
                ui.set_config(ui.with_data(config, chosen))
                current = chosen
            s = ds.stats.summary()
            src = ds.meta.get("source", "")
            st.subheader(f"{src}")
            c = st.columns(5)
            c[0].metric("examples n", f"{s['n']:,}")
            c[1].metric("features d", f"{s['d']:,}")
            c[2].metric("nonzeros", f"{s['nnz']:,}")
            c[3].metric("nodes K", f"{s['nodes']:,}")
            c[4].metric("test examples", f"{ds.y_test.size:,}")
            st.caption(f"Node sizes n_k from {s['node_size_min']:,} to {s['node_size_max']:,} "
                       f"(median {s['node_size_median']:,.0f}); "
                       f"{100 * s['features_on_fewer_than_1000_nodes']:.1f}% of features appear on fewer than "
                       f"1,000 nodes. {_labels_text(ds.meta.get('labels'))}")
            st.plotly_chart(feature_appearance_figure(ds.stats.omega, ds.n_nodes), width="stretch")
            a, b = st.columns(2)
            a.plotly_chart(node_size_figure(ds.node_sizes), width="stretch")
            if ds.task == "classification":
                pos = np.add.reduceat((ds.y > 0).astype(float), ds.offsets[:-1]) / ds.node_sizes
                b.plotly_chart(label_balance_figure(pos, ds.node_sizes), width="stretch")
                st.subheader("Baselines (Section 4.1)")
                base = ui.load_baselines(current)
                opt = ui.load_optimum(current, config.loss, config.lam)
                st.table({"predictor": ["predict the majority label", "per-node majority", "the optimum w*"],
                          "test error": [ui.fmt_pct(base.get("majority")), ui.fmt_pct(base.get("node_majority")),
                                         ui.fmt_pct(opt["test_error"])]})
                st.caption(f"Optimum: f* = {opt['objective']:.10f}, ‖∇f(w*)‖ = {opt['grad_norm']:.1e}, "
                           f"λ = {opt['lam']:.3g}, {opt['seconds']:.2f} s (Newton-CG).")
        if spec is not None and spec != current:  # the new data failed to build (the error is above)
            st.caption("The current data set is unchanged.")
