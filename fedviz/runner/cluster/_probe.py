"""The probe each process of a Dask cluster runs before fedviz sends it work (see
:func:`fedviz.runner.cluster.check_cluster`): what it imports as fedviz, a hash of that
source, and the versions of the libraries its numbers depend on.

This module imports nothing at its top, and :func:`probe` names a module that does not exist,
so pickle cannot send it by reference and Dask's cloudpickle sends it *by value*: a scheduler or worker that cannot import fedviz still runs it and says
so, where a task that names ``fedviz.…`` fails to unpickle with nothing but a
deserialisation error.
"""

def probe() -> dict:
    """This process's fedviz (version, source hash, path) and numpy/numba versions, or the import error."""
    import hashlib, importlib, importlib.metadata, os
    out = {}
    for dist in ("numpy", "numba"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except Exception:
            out[dist] = None
    try:
        # The module every task names: importing it imports what a task needs (numba, scipy, ...).
        importlib.import_module("fedviz.runner.cluster")
        import fedviz
    except BaseException as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
        return out
    root = os.path.dirname(os.path.abspath(fedviz.__file__))
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
                with open(path, "rb") as f:
                    digest.update(f.read() + b"\0")
    out.update(fedviz=fedviz.__version__, source=digest.hexdigest()[:12], path=root)
    return out


# No importable module of this name: Dask pickles the function by value (see the module's docstring).
probe.__module__ = "fedviz_cluster_probe"
