"""Loading the library, the declared signatures, and agreement with the header."""

import ctypes
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import ffpa
from ffpa import _library, _types
from conftest import HEADER, clean_environment, library_path

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ffpa.__file__)))


def run_python(code, env):
    """Runs code in a fresh interpreter that imports ffpa from this tree."""
    env = dict(env, PYTHONPATH=PACKAGE_DIR, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=60)


def test_import_works_without_the_library_and_first_use_says_where_it_looked():
    result = run_python("""
        import ffpa
        try:
            ffpa.get_version()
        except ffpa.LibraryNotFound as error:
            print("LibraryNotFound:", error)
        """, dict(clean_environment(), FFPA_LIBRARY="/nonexistent/libffpa.so.0"))
    assert result.returncode == 0, result.stderr
    assert "LibraryNotFound:" in result.stdout
    assert "FFPA_LIBRARY='/nonexistent/libffpa.so.0'" in result.stdout


def test_the_loader_search_is_described():
    env = dict(clean_environment(), LD_LIBRARY_PATH="/nowhere")
    result = run_python("""
        import ffpa
        try:
            ffpa.Handle()
        except ffpa.LibraryNotFound as error:
            print("LibraryNotFound:", error)
        except Exception as error:
            print("loaded:", error)
        """, env)
    if "loaded:" in result.stdout:
        pytest.skip("libffpa.so.0 is installed where the loader finds it")
    assert "LD_LIBRARY_PATH=/nowhere" in result.stdout, result.stdout + result.stderr
    assert "FFPA_LIBRARY" in result.stdout and "ld.so cache" in result.stdout


def test_ffpa_library_accepts_a_file_or_a_directory():
    path = library_path()
    for value in (path, os.path.dirname(path)):
        result = run_python("import ffpa; print(ffpa.get_version())",
                            dict(clean_environment(), FFPA_LIBRARY=value))
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(ffpa.HEADER_VERSION)


def test_versions(header_text):
    parts = {name: int(re.search(rf"#define FFPA_VERSION_{name} (\d+)", header_text).group(1))
             for name in ("MAJOR", "MINOR", "PATCH")}
    assert ffpa.HEADER_VERSION == parts["MAJOR"] * 10000 + parts["MINOR"] * 100 + parts["PATCH"]
    assert ffpa.__version__ == "{MAJOR}.{MINOR}.{PATCH}".format(**parts)
    assert ffpa.get_version() == ffpa.HEADER_VERSION
    assert ffpa.__version__ in ffpa.build_info()
    major, minor = divmod(ffpa.HEADER_VERSION, 10000)[0], ffpa.HEADER_VERSION % 10000 // 100
    assert ffpa.is_compatible(major * 10000 + minor * 100 + 9)
    assert ffpa.is_compatible(major * 10000 + (minor + 1) * 100)
    assert not ffpa.is_compatible((major + 1) * 10000 + minor * 100)
    if minor:
        assert not ffpa.is_compatible(major * 10000 + (minor - 1) * 100)


def test_every_function_of_the_header_is_declared(header_text):
    declarations = re.findall(r"FFPA_API\s+[\w\s\*]+?\b(ffpa\w+)\s*\(([^)]*)\)", header_text)
    assert len(declarations) >= 30
    for name, parameters in declarations:
        assert name in _library.SIGNATURES, f"{name} is not declared"
        count = 0 if parameters.strip() == "void" else parameters.count(",") + 1
        assert len(_library.SIGNATURES[name][1]) == count, name
    assert set(_library.SIGNATURES) == {name for name, _ in declarations}
    lib = ffpa.library()
    for name, (restype, argtypes) in _library.SIGNATURES.items():
        assert getattr(lib, name).argtypes == argtypes


ENUMS = {
    "ffpaStatus": (ffpa.Status, "FFPA_STATUS_"),
    "ffpaDataType": (ffpa.DataType, "FFPA_DATA_TYPE_"),
    "ffpaLogLevel": (ffpa.LogLevel, "FFPA_LOG_LEVEL_"),
    "ffpaPolicyType": (ffpa.PolicyType, "FFPA_POLICY_TYPE_"),
    "ffpaAccumulator": (ffpa.Accumulator, "FFPA_ACCUMULATOR_"),
    "ffpaAutotuneMode": (ffpa.AutotuneMode, "FFPA_AUTOTUNE_MODE_"),
    "ffpaPolicyKnob": (ffpa.Knob, "FFPA_POLICY_"),
    "ffpaPolicySource": (ffpa.PolicySource, "FFPA_POLICY_SOURCE_"),
    "ffpaCausalMode": (ffpa.CausalMode, "FFPA_CAUSAL_"),
    "ffpaSliceMask": (ffpa.SliceMask, "FFPA_SLICE_MASK_"),
    "ffpaSharding_t": (ffpa.Sharding, "FFPA_SHARDING_"),
}


@pytest.mark.parametrize("c_name", sorted(ENUMS))
def test_enumerations_match_the_header(header_text, c_name):
    python_enum, prefix = ENUMS[c_name]
    body = re.search(rf"typedef enum {c_name}(?: FFPA_ENUM_TYPE)? \{{(.*?)\}}", header_text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    values = {name.removeprefix(prefix): int(value, 0)
              for name, value in re.findall(r"\b(FFPA_\w+)\s*=\s*(\w+)", body)
              if not name.endswith("FORCE_INT32")}
    assert {m.name: int(m) for m in python_enum} == values


def test_attention_attributes_and_limits_match_the_header(header_text):
    assert f"FFPA_ATTENTION_SOFTMAX_SCALE = {_types.ATTENTION_SOFTMAX_SCALE}," in header_text
    assert f"FFPA_ATTENTION_CAUSAL_MODE = {_types.ATTENTION_CAUSAL_MODE}," in header_text
    assert f"FFPA_ATTENTION_KEY_LENGTHS = {_types.ATTENTION_KEY_LENGTHS}," in header_text
    assert f"#define FFPA_MAX_HEAD_DIM {ffpa.MAX_HEAD_DIM}\n" in header_text
    assert f"#define FFPA_MAX_TENSOR_DIMS {_types.MAX_TENSOR_DIMS}\n" in header_text
    assert f"#define FFPA_MAX_MERGE_PARTIALS {ffpa.MAX_MERGE_PARTIALS}\n" in header_text


STRUCTS = {
    "ffpaDeviceDesc_t": _types.DeviceDescStruct,
    "ffpaPolicyInfo_t": _types.PolicyInfoStruct,
    "ffpaPlanCacheStats_t": _types.PlanCacheStatsStruct,
}


def test_structure_layouts_match_the_c_compiler(tmp_path, header_text):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to compare structure layouts with")
    lines = []
    for c_name, struct in STRUCTS.items():
        lines.append(f'printf("{c_name} %zu\\n", sizeof({c_name}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{c_name}.{field} %zu\\n", offsetof({c_name}, {field}));')
    source = tmp_path / "layout.c"
    source.write_text("#include <stddef.h>\n#include <stdio.h>\n#include <ffpa/ffpa.h>\n"
                      "int main(void) {\n" + "\n".join(lines) + "\nreturn 0;\n}\n")
    program = tmp_path / "layout"
    subprocess.run([compiler, "-std=c11", f"-I{HEADER.parents[1]}",
                    str(source), "-o", str(program)], check=True)
    c_layout = dict(line.rsplit(" ", 1) for line in
                    subprocess.run([str(program)], capture_output=True, text=True,
                                   check=True).stdout.splitlines())
    for c_name, struct in STRUCTS.items():
        assert int(c_layout[c_name]) == ctypes.sizeof(struct), c_name
        for field, _ in struct._fields_:
            assert int(c_layout[f"{c_name}.{field}"]) == getattr(struct, field).offset, field
