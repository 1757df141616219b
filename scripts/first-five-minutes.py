"""A new user's first five minutes after `pip install .` alone: README.md's quickstart runs as written, and
every door whose optional package is missing stops with one line naming the package and the extra to install
(the commands: exit 2 and one line on stderr; `import pycumsum_op.onnx` / `pycumsum_op.training`: one
ImportError line).

    python scripts/first-five-minutes.py            # in an environment made by `pip install .` alone
    python scripts/first-five-minutes.py --without onnx,onnxruntime,numba,networkx
                                                    # the same where those are installed: each child process
                                                    # starts with them made unimportable

Only the standard library and the installed package are used: `make test-matrix` (scripts/test-matrix.sh)
runs it in each legacy venv right after `pip install .`, tests/test_first_five_minutes.py in make test's venv
with --without. One line per check; exit status 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
from user_runs import check_example, own_stderr_lines, readme_examples  # noqa: E402 (the tests folder first)

#: The README section that must run after the install line above it, and nothing more.
QUICKSTART = "Quickstart"
#: Each door with an optional package: the command line (its input files do not exist: the missing package
#: is reported before any input is read) and the package.
DOORS = [
    (["onnx", "import", "missing.onnx", "--predict-net", "p.pb", "--init-net", "i.pb"], "onnx"),
    (["onnx", "export", "missing.pb", "--input", "x=float32:2,3", "-o", "m.onnx"], "onnx"),
    (["train", "--workers", "1", "--steps", "1"], "networkx"),
]
#: The library's doors with an optional package: an import, and the package.
IMPORTS = [("pycumsum_op.onnx", "onnx"), ("pycumsum_op.training", "networkx")]
_PROBE = """import importlib, json, sys
missing = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ImportError:
        missing.append(name)
print(json.dumps(missing))
"""


def blocking_environment(names, directory):
    """os.environ with a sitecustomize on PYTHONPATH that makes ``names`` unimportable in every child."""
    with open(os.path.join(directory, "sitecustomize.py"), "w") as handle:
        handle.write("import sys\nfor _name in {!r}:\n    sys.modules[_name] = None  # import fails\n".format(
            sorted(names)))
    paths = [directory] + [path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def run(command, env, cwd):
    return subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=300)


def missing_packages(env, cwd, packages):
    result = run([sys.executable, "-c", _PROBE] + sorted(packages), env, cwd)
    if result.returncode != 0:
        raise SystemExit("cannot probe the optional packages:\n" + result.stderr)
    return set(json.loads(result.stdout))


def check_quickstart(env, cwd):
    """None when every ```python block under the README's Quickstart heading prints its ```text block."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        examples = [example for example in readme_examples(handle.read()) if example.heading == QUICKSTART]
    if not examples:
        return "README.md has no ```python block under '## {}'".format(QUICKSTART)
    problems = [check_example(example, cwd, env) for example in examples]
    return "\n".join(problem for problem in problems if problem) or None


def check_door(arguments, package, install, env, cwd):
    """None when ``pycumsum-op ARGUMENTS`` exits 2 with one stderr line naming ``package`` and ``install``."""
    command = os.path.join(os.path.dirname(sys.executable), "pycumsum-op")
    before = set(os.listdir(cwd))
    result = run([command] + arguments, env, cwd)
    lines = own_stderr_lines(result.stderr)
    expected = "pycumsum-op {}: error: this command needs {} (".format(arguments[0], package)
    if (result.returncode, result.stdout, len(lines)) != (2, "", 1) or not lines[0].startswith(expected) \
            or not lines[0].endswith("): " + install) or set(os.listdir(cwd)) != before:
        return "exit {}, stdout {!r}, stderr:\n{}".format(result.returncode, result.stdout, result.stderr)
    return None


def check_import(module, package, install, env, cwd):
    """None when importing ``module`` raises one ImportError line naming ``package`` and ``install``."""
    program = ("import json\ntry:\n    import {}\nexcept ImportError as error:\n"
               "    print(json.dumps(str(error)))\n").format(module)
    result = run([sys.executable, "-c", program], env, cwd)
    message = json.loads(result.stdout) if result.returncode == 0 and result.stdout.strip() else None
    if message is None or "\n" in message or not message.startswith("{} needs {} (".format(module, package)) \
            or not message.endswith("): " + install):
        return "exit {}, printed {!r}, stderr:\n{}".format(result.returncode, message, result.stderr[-2000:])
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without", default="", metavar="P1,P2",
                        help="optional packages to make unimportable in every child process")
    args = parser.parse_args(argv)
    from pycumsum_op._runtime import EXTRAS, install_command  # the installed package's own table
    failures = 0
    with tempfile.TemporaryDirectory() as blocker, tempfile.TemporaryDirectory() as cwd:
        without = {name for name in args.without.split(",") if name}
        env = blocking_environment(without, blocker) if without else dict(os.environ)
        missing = missing_packages(env, cwd, EXTRAS)
        print("optional packages missing here: {}".format(", ".join(sorted(missing)) or "none"))
        checks = [("README quickstart", lambda: check_quickstart(env, cwd))]
        for arguments, package in DOORS:
            if package in missing:
                name = "pycumsum-op " + " ".join(word for word in arguments[:2] if word.isalpha())
                checks.append((name, lambda a=arguments, p=package: check_door(
                    a, p, install_command(EXTRAS[p]), env, cwd)))
        for module, package in IMPORTS:
            if package in missing:
                checks.append(("import " + module, lambda m=module, p=package: check_import(
                    m, p, install_command(EXTRAS[p]), env, cwd)))
        for name, check in checks:
            problem = check()
            failures += problem is not None
            print("{}: {}".format(name, "ok" if problem is None else "FAILED: " + problem), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
