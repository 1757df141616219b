"""MKL's code path on x86 CPUs not made by Intel: ``import pycumsum_op`` sets MKL_DEBUG_CPU_TYPE=5 (AVX2) where the
CPU has AVX2 and FMA and the variable is unset, and never overrides the user's value."""
import os
import subprocess
import sys

import pytest

from pycumsum_op._runtime import MKL_CODE_PATH, choose_mkl_code_path

AMD = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n\nprocessor\t: 1\n"
INTEL = AMD.replace("AuthenticAMD", "GenuineIntel")
NO_AVX2 = AMD.replace(" avx2", "")
NO_FMA = AMD.replace(" fma", "")


@pytest.fixture
def unset(monkeypatch):
    monkeypatch.delenv(MKL_CODE_PATH, raising=False)


@pytest.mark.parametrize("cpuinfo, chosen", [(AMD, True), (INTEL, False), (NO_AVX2, False), (NO_FMA, False),
                                             ("", False), ("vendor_id : AuthenticAMD\n", False),
                                             ("\x00\xff garbage without fields", False)])
def test_the_avx2_path_is_chosen_only_for_a_cpu_not_intels_with_avx2_and_fma(tmp_path, unset, cpuinfo, chosen):
    path = tmp_path / "cpuinfo"
    path.write_text(cpuinfo, encoding="latin-1")
    assert choose_mkl_code_path(str(path)) is chosen
    assert os.environ.get(MKL_CODE_PATH) == ("5" if chosen else None)


@pytest.mark.parametrize("value", ["", "2"])
def test_a_value_the_user_set_is_kept(tmp_path, monkeypatch, value):
    monkeypatch.setenv(MKL_CODE_PATH, value)
    path = tmp_path / "cpuinfo"
    path.write_text(AMD)
    assert choose_mkl_code_path(str(path)) is False
    assert os.environ[MKL_CODE_PATH] == value


def test_an_unreadable_cpuinfo_leaves_mkl_its_choice(tmp_path, unset):
    assert choose_mkl_code_path(str(tmp_path / "missing")) is False
    assert choose_mkl_code_path(str(tmp_path)) is False  # a folder
    assert MKL_CODE_PATH not in os.environ


def test_import_sets_it_before_caffe2_runs_a_product(tmp_path):
    """In a new process: after ``import pycumsum_op`` the variable is set exactly where this CPU qualifies, and a
    product through Caffe2's MKL still equals numpy's float64 product within float32 rounding."""
    with open("/proc/cpuinfo", "rb") as handle:
        text = handle.read(1 << 16).decode("ascii", "replace")
    vendor = next((line.split(":")[1].strip() for line in text.splitlines() if line.startswith("vendor_id")), "")
    flags = next((line.split(":")[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    expected = "5" if vendor not in ("", "GenuineIntel") and {"avx2", "fma"} <= set(flags) else None
    script = (
        "import os, numpy as np\n"
        "import pycumsum_op\n"
        "from caffe2.python import core, workspace\n"
        "a, b = np.random.RandomState(0).rand(64, 96).astype(np.float32), np.random.RandomState(1).rand(96, 80)"
        ".astype(np.float32)\n"
        "workspace.FeedBlob('a', a); workspace.FeedBlob('b', b)\n"
        "workspace.RunOperatorOnce(core.CreateOperator('MatMul', ['a', 'b'], ['c']))\n"
        "exact = a.astype(np.float64) @ b.astype(np.float64)\n"
        "np.testing.assert_allclose(workspace.FetchBlob('c'), exact, rtol=1e-5)\n"
        "print(os.environ.get({!r}))\n".format(MKL_CODE_PATH))
    environment = {key: value for key, value in os.environ.items() if key != MKL_CODE_PATH}
    done = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == str(expected)
