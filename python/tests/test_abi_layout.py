"""The package's ctypes mirror of hugepin.h (hugepin/_abi.py) against the header itself: every
structure's size and field offsets as a C compiler lays them out (abi_layout.c), every function
the header declares with its argument count, and the ABI version."""

import ctypes
import json
import re
import subprocess

from conftest import require_environment

from hugepin import _abi


def compiled_layout() -> dict:
    program = require_environment("HUGEPIN_ABI_LAYOUT")
    return json.loads(subprocess.run([program], check=True, capture_output=True, text=True).stdout)


def test_every_structure_has_the_c_size_and_offsets():
    layout = compiled_layout()["structures"]
    assert sorted(layout) == sorted(_abi.STRUCTURES)
    for name, structure in _abi.STRUCTURES.items():
        c = layout[name]
        assert ctypes.sizeof(structure) == c["size"], name
        assert [field for field, _ in structure._fields_] == list(c["fields"]), name
        for field, (offset, size) in c["fields"].items():
            described = getattr(structure, field)
            assert (described.offset, described.size) == (offset, size), f"{name}.{field}"


def test_the_package_speaks_the_headers_abi_version():
    major, minor, _ = compiled_layout()["version"]
    assert _abi.ABI_VERSION == (major, minor)


def test_the_headers_constants_have_the_packages_values():
    assert compiled_layout()["constants"] == {"HUGEPIN_COMPLETION_SPIN": _abi.COMPLETION_SPIN}


def test_every_declared_function_has_a_prototype_with_its_argument_count():
    header = open(require_environment("HUGEPIN_HEADER")).read()
    header = re.sub(r"/\*.*?\*/", "", header, flags=re.S)
    declared = {}
    for match in re.finditer(r"HUGEPIN_API\s+[^;(]*?\b(hugepin_\w+)\s*\(([^)]*)\)", header):
        arguments = match.group(2).strip()
        declared[match.group(1)] = 0 if arguments in ("", "void") else arguments.count(",") + 1
    assert len(declared) > 30
    assert sorted(declared) == sorted(_abi.PROTOTYPES)
    for name, count in declared.items():
        assert len(_abi.PROTOTYPES[name][1]) == count, name


def test_a_library_of_another_minor_version_is_refused_at_import_with_its_path():
    class Library:
        @staticmethod
        def hugepin_version():
            return 400

        @staticmethod
        def hugepin_version_string():
            return b"0.4.0"

    try:
        _abi._check_version(Library(), "/opt/lib/libhugepin.so.0")
    except ImportError as error:
        assert "/opt/lib/libhugepin.so.0 is libhugepin 0.4.0" in str(error)
        assert "C ABI of 0.3" in str(error)
    else:
        raise AssertionError("a 0.4 library was accepted")
