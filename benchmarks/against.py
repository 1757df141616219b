"""The shape-class tables (`classes.py`) of this tree and of another commit, same seeds, in one run.

    python benchmarks/against.py 3f33613                       # seeds 1, 2, 3: none used for tuning
    python benchmarks/against.py v0.2.0 --seeds 4 --count 4 --clock wall

The other commit is checked out in a temporary git worktree and each tree runs its own `classes.py` in its own
process, seed by seed, the two alternating (the other commit first), so that both see the machine in the same
state. Each class table's ratios to torch (torch timed in the same process) are then set side by side: before ->
after, median / worst. A ratio to torch, not a time, is compared, so that a slower or faster machine between the
two processes moves both sides alike.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

from timing import table

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COLUMNS = ("forward with", "forward without", "fwd+bwd with", "fwd+bwd without")
_HEADING = re.compile(r"^### Shape classes, seed (\d+), (\w+) caches")


def summaries(markdown):
    """{(seed, cache state): {class: {column: "median / worst"}}} from the class tables of ``classes.py``'s output."""
    found, key, header = {}, None, None
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            key, header = (int(heading.group(1)), heading.group(2)), None
            found[key] = {}
        elif key and line.startswith("| class |"):
            header = [cell.strip() for cell in line.strip("|").split("|")]
        elif key and header and line.startswith("| ") and not line.startswith("|---"):
            cells = dict(zip(header, (cell.strip() for cell in line.strip("|").split("|"))))
            found[key][cells["class"]] = {column: cells[column] for column in COLUMNS}
        elif header and not line.strip():
            key, header = None, None  # the summary table ended: the per-case tables follow
    return found


def run_classes(tree, seed, options):
    """``classes.py`` of the tree at ``tree`` for one seed: its markdown."""
    command = [sys.executable, "classes.py", "--seeds", str(seed)] + options
    environment = dict(os.environ, PYTHONPATH=tree)
    return subprocess.run(command, cwd=os.path.join(tree, "benchmarks"), env=environment, check=True,
                          stdout=subprocess.PIPE, universal_newlines=True).stdout


def compare(commit, seeds, options):
    """Markdown: per seed and cache state, each class's ratios before (``commit``) -> after (this tree)."""
    with tempfile.TemporaryDirectory() as scratch:
        other = os.path.join(scratch, "tree")
        subprocess.run(["git", "worktree", "add", "--detach", other, commit], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        try:
            before, after = {}, {}
            for seed in seeds:
                before.update(summaries(run_classes(other, seed, options)))
                after.update(summaries(run_classes(ROOT, seed, options)))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", other], cwd=ROOT, check=True)
    out = ["## Shape classes before ({}) and after (this tree), same seeds, one run".format(commit), "",
           "PyCumSum / torch, median / worst, before -> after; `classes.py {}`.".format(" ".join(options)), ""]
    for key in sorted(after):
        rows = [[name] + ["{} -> {}".format(before.get(key, {}).get(name, {}).get(column, "-"), cells[column])
                          for column in COLUMNS]
                for name, cells in after[key].items()]
        out += ["### Seed {}, {} caches".format(*key), "", table(["class"] + list(COLUMNS), rows), ""]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commit", help="the commit to compare with (any git revision)")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    parser.add_argument("--count", type=int, default=6, help="cumsum shapes per class and seed")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="cpu",
                        help="this thread's CPU time (default: the two trees' processes may meet other jobs) or wall")
    args = parser.parse_args(argv)
    try:
        seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        parser.error("--seeds {!r}: comma-separated whole numbers".format(args.seeds))
    if min(seeds) < 0 or args.count < 1:
        parser.error("seeds must be >= 0 and --count >= 1")
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", args.commit + "^{commit}"], cwd=ROOT,
                           stdout=subprocess.DEVNULL)
    if found.returncode != 0:
        parser.error("{!r} names no commit of the repository at {}".format(args.commit, ROOT))
    print(compare(args.commit, seeds, ["--count", str(args.count), "--clock", args.clock, "--statistic", "min"]))


if __name__ == "__main__":
    main()
