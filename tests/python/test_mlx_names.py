"""Every public name of MLX 0.32.4 (tests/python/data/mlx_0_32_4_names.json, written once by
make_mlx_names.py with mlx[cpu]) against Tessera's modules: a name MLX has and Tessera lacks
fails here unless it is in NOT_YET below, the list of what is still to be added (each
addition removes its entry, so the list only shrinks; a name listed there that exists is an
error too). The next MLX release's list makes its new names show up as one failing test."""

import importlib
import json
import pathlib

import tessera.core as mx

NAMES = json.loads((pathlib.Path(__file__).parent / "data" / "mlx_0_32_4_names.json").read_text())

NOT_YET: dict = {}  # empty since export_function / import_function (every 0.32.4 name is here)


def tessera_object(mlx_name):
    if mlx_name == "mlx.core.array":
        return mx.array
    name = "tessera" + mlx_name[len("mlx"):]
    try:
        return importlib.import_module(name)
    except ImportError:  # a submodule of the extension (tessera.core.fft) is an attribute
        parent, _, leaf = name.rpartition(".")
        return getattr(importlib.import_module(parent), leaf)


def test_the_version_programs_read_is_the_mlx_release_whose_names_are_checked():
    import tessera

    assert mx.__version__ == NAMES["version"] == "0.32.4"
    assert mx.__tessera_version__ == tessera.__version__


def test_every_public_name_of_mlx_0_32_4_is_here_or_listed_as_not_yet():
    missing, listed_but_present = {}, {}
    for module, names in NAMES.items():
        if not isinstance(names, list):
            continue
        have = set(dir(tessera_object(module)))
        todo = NOT_YET.get(module, set())
        lacking = sorted(set(names) - have - todo)
        if lacking:
            missing[module] = lacking
        present = sorted(todo & have)
        if present:
            listed_but_present[module] = present
    assert not missing, f"MLX 0.32.4 names Tessera lacks: {missing}"
    assert not listed_but_present, f"in NOT_YET but present (remove them there): {listed_but_present}"
    assert set(NOT_YET) <= set(NAMES)
