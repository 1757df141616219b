"""Mutation tests of the unpickler's allow-list: each over-broad allow-list below (a whole module allowed, as a
careless edit would) lets attack payloads through the restricted unpickler, and the allow-list tests of
test_safe_loading.py then FAIL for every payload that module serves. Nothing runs: allowed globals stay
placeholders, so the payloads' markers never appear."""
import os

import pytest

import test_safe_loading
from pycumsum_op import verify_net
from pycumsum_op._safe_unpickle import RefusedPickle, _RestrictedUnpickler, inspect_builder
from pycumsum_op.ops.builders import BUILDERS
from test_safe_loading import payloads, python_op_net

SYSTEM_MODULE = os.system.__module__  # "posix" on Linux


class WholeModules(frozenset):
    """An allow-list that also holds every name of ``modules``: the mutant."""

    def __new__(cls, names, modules):
        allowed = super().__new__(cls, names)
        allowed.modules = frozenset(modules)
        return allowed

    def __contains__(self, name):
        return frozenset.__contains__(self, name) or name.rpartition(".")[0] in self.modules


def allow_whole_modules(monkeypatch, modules):
    """Mutate the restricted unpickler: every global of ``modules`` allowed, and callable while unpickling."""
    original = _RestrictedUnpickler.__init__

    def mutant(self, file, protocol, allowed, callable_at_load):
        original(self, file, protocol, WholeModules(allowed, modules), WholeModules(callable_at_load, modules))

    monkeypatch.setattr(_RestrictedUnpickler, "__init__", mutant)


#: mutant -> the payloads (test_safe_loading.payloads) it must let through
MUTANTS = {
    "builtins": ["eval_in_kwargs", "exec_protocol2", "getattr_chain"],
    SYSTEM_MODULE: ["system_builder", "system_in_args"],
    "subprocess": ["subprocess_protocol0"],
}


def test_every_named_payload_is_served_by_some_mutant():
    named = {name for name, (_, _, callable_name, _) in payloads("/nonexistent").items() if callable_name}
    assert named == {name for names in MUTANTS.values() for name in names}


@pytest.mark.parametrize("module", sorted(MUTANTS))
def test_an_over_broad_allow_list_lets_payloads_through_the_static_check(monkeypatch, tmp_path, module):
    found = payloads(tmp_path)
    for name in MUTANTS[module]:  # refused by the real allow-list ...
        with pytest.raises(RefusedPickle, match="which is not allowed"):
            inspect_builder(found[name][0], frozenset(BUILDERS))
    allow_whole_modules(monkeypatch, [module])
    for name in MUTANTS[module]:  # ... pass the mutant's: no global refused (getattr's result, a placeholder,
        data, marker, callable_name, _ = found[name]  # cannot be called: that chain stops later, unnamed)
        try:
            inspect_builder(data, frozenset(BUILDERS))
        except RefusedPickle as refused:
            assert refused.callable is None and "not allowed" not in refused.reason, (name, refused.reason)
        assert not os.path.exists(marker)
    if module == SYSTEM_MODULE:  # os.system as the builder itself: verify_net now calls the net safe
        verified = verify_net(python_op_net(found["system_builder"][0]))
        assert verified[0].builders[0] == "{}.system".format(SYSTEM_MODULE)


@pytest.mark.parametrize("module", sorted(MUTANTS))
def test_the_allow_list_tests_fail_against_each_mutant(monkeypatch, tmp_path, module):
    """test_safe_loading's per-payload test passes on the real allow-list and fails on the mutant, for every
    payload the mutant serves: the tests notice an over-broad allow-list, payload by payload."""
    for name in MUTANTS[module]:
        test_safe_loading.test_verify_refuses_each_payload_and_runs_nothing(tmp_path / ("real_" + name), name)
    allow_whole_modules(monkeypatch, [module])
    for name in MUTANTS[module]:
        folder = tmp_path / ("mutant_" + name)
        folder.mkdir()
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            test_safe_loading.test_verify_refuses_each_payload_and_runs_nothing(folder, name)
        assert not any(os.path.exists(marker) for _, marker, _, _ in payloads(folder).values())
