"""Read a Caffe2 Python-op builder pickle without importing or calling anything in it.

Caffe2's ``net.Python((func, args, kwargs))`` stores ``pickle.dumps((func, args, kwargs))``
in the op; Caffe2 unpickles it with plain ``pickle.loads`` and calls ``func(*args, **kwargs)``
when the net is created. `inspect_builder` answers "what would that do?" safely:

- a size cap, `MAX_PICKLE_BYTES` (64 KiB; pycumsum_op's builder pickles are about 150 bytes),
  checked before anything is read;
- a static pass (`pickletools.genops`, pure parsing) refuses opcodes that reach objects
  without ``find_class`` (EXT1/2/4 read copyreg's extension cache, PERSID/BINPERSID, out-of-band
  buffers), memo indices the pickle cannot have filled (CPython sizes its memo table to the largest
  index, so a 10-byte pickle could cost gigabytes) and frames longer than the data; every
  length-prefixed argument is checked against the bytes present, so the unpickler's memory stays
  proportional to the pickle's size (at most a few hundred bytes per byte of pickle);
- the same pass follows the unpickler's stack and memo without building anything: each value is
  known only by its *hash cost* (tuples are hashed element by element on every use, and DUP or a
  memo GET shares one tuple many times: 100 doublings in 200 bytes make a 2**100-element key; a
  long int is hashed digit by digit, also on every use).
  Every value the unpickler would hash (a dict key, a set or frozenset item) is costed first, and
  the pickle is refused once that work passes `MAX_HASHED_NODES`, so unpickling never hashes
  more than that many tuple elements, or once it would insert more than `MAX_HASHED_KEYS` keys and
  items (numbers hash without salt: n keys made to collide cost n * n / 2 comparisons);
- `_RestrictedUnpickler.find_class` refuses any global that is not allowed. Allowed globals are
  *not imported*: the unpickler returns an inert `Global` placeholder, so REDUCE / INST / OBJ "call"
  the placeholder, which only records a `Call` (and refuses it unless the callable was listed as
  callable); BUILD on a `Call` only stores the state; NEWOBJ needs a real class and fails. Nothing
  in the pickle ever runs, and nothing walks the result (a shared tuple tree is never expanded).

>>> import pickle
>>> from pycumsum_op.ops.builders import scan_forward
>>> data = pickle.dumps((scan_forward, (), {"scan": "cumsum", "axis": 1}))
>>> inspect_builder(data, {"pycumsum_op.ops.builders.scan_forward"}).builder
'pycumsum_op.ops.builders.scan_forward'
>>> import os
>>> inspect_builder(pickle.dumps((os.system, ("echo hi",), {})), set())
Traceback (most recent call last):
...
pycumsum_op._safe_unpickle.RefusedPickle: references posix.system, which is not allowed
"""
import _compat_pickle
import io
import pickle
import pickletools
from typing import FrozenSet, NamedTuple, Optional

#: The largest builder pickle read at all (bytes).
MAX_PICKLE_BYTES = 64 * 1024
#: Opcodes that produce objects without going through find_class, or need outside help.
FORBIDDEN_OPCODES = frozenset(["EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER",
                               "READONLY_BUFFER"])
#: Opcodes that store into the memo at the index given as their argument.
MEMO_PUT_OPCODES = frozenset(["PUT", "BINPUT", "LONG_BINPUT"])
MEMO_GET_OPCODES = frozenset(["GET", "BINGET", "LONG_BINGET"])
#: The most tuple elements the unpickler may hash (dict keys, set items) for one pickle.
MAX_HASHED_NODES = 100000
#: The most dict keys and set items one pickle may make the unpickler insert (a builder's kwargs hold a
#: few). Numbers hash without salt, so n colliding keys cost n * n / 2 comparisons: 1024 took 0.02 s.
MAX_HASHED_KEYS = 1024
#: Opcodes whose stack slice the unpickler hashes: the dict keys (every other item) or every set item.
_HASHED_SLICES = {"SETITEM": 2, "SETITEMS": 2, "DICT": 2, "ADDITEMS": 1, "FROZENSET": 1}


class RefusedPickle(Exception):
    """A builder pickle that must not be unpickled; ``callable`` names the culprit when there is one."""

    def __init__(self, reason: str, callable_name: Optional[str] = None):
        super().__init__(reason)
        self.reason = reason
        self.callable = callable_name


class Global(object):
    """Stands in for a global the pickle references; the real object is never imported."""
    __slots__ = ("name", "_callable")

    def __init__(self, name: str, callable_: bool):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_callable", callable_)

    def __setattr__(self, key, value):  # BUILD with slot state would land here
        raise RefusedPickle("sets attribute {!r} on {}".format(key, self.name), self.name)

    def __call__(self, *args, **kwargs):  # REDUCE, INST and OBJ land here
        if not self._callable:
            raise RefusedPickle("calls {} while unpickling; only callables listed in allow= may be "
                                "called there".format(self.name), self.name)
        return Call(self, args, kwargs)

    def __repr__(self):
        return "<global {}>".format(self.name)


class Call(object):
    """Records ``func(*args)`` that plain unpickling would have made (and any BUILD state)."""
    __slots__ = ("func", "args", "kwargs", "states")

    def __init__(self, func: Global, args: tuple, kwargs: dict):
        for key, value in (("func", func), ("args", args), ("kwargs", kwargs), ("states", [])):
            object.__setattr__(self, key, value)

    def __setattr__(self, key, value):
        raise RefusedPickle("sets attribute {!r} on the result of {}".format(key, self.func.name), self.func.name)

    def __setstate__(self, state):  # BUILD
        self.states.append(state)

    def __repr__(self):
        return "<call {}>".format(self.func.name)


class BuilderInfo(NamedTuple):
    """What a builder pickle holds: the builder's dotted name and the arguments Caffe2 will call it with.

    ``args`` / ``kwargs`` may hold `Global` / `Call` placeholders (for callables listed as callable)."""
    builder: str
    args: tuple
    kwargs: dict


class _RestrictedUnpickler(pickle.Unpickler):
    """find_class records each global and refuses those not allowed; allowed ones stay placeholders."""

    def __init__(self, file, protocol: int, allowed: FrozenSet[str], callable_at_load: FrozenSet[str]):
        super().__init__(file)
        self._protocol = protocol
        self._allowed = allowed
        self._callable_at_load = callable_at_load

    def find_class(self, module, name):
        if self._protocol < 3:  # as pickle.loads does (fix_imports): Python 2 names -> Python 3 names
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        dotted = "{}.{}".format(module, name)
        if dotted not in self._allowed:
            raise RefusedPickle("references {}, which is not allowed".format(dotted), dotted)
        return Global(dotted, dotted in self._callable_at_load)

    def persistent_load(self, pid):
        raise RefusedPickle("uses a persistent id, which a builder never needs")


def _static_check(data: bytes) -> int:
    """Refuse forbidden opcodes, memo indices beyond the data, overlong frames and keys too costly to
    hash (parsing and counting only); returns the pickle protocol (0 without PROTO)."""
    protocol = 0
    stack = _Stack()
    try:
        for opcode, arg, position in pickletools.genops(data):
            if opcode.name in FORBIDDEN_OPCODES:
                raise RefusedPickle("uses pickle opcode {} at byte {}, which builders never need and "
                                    "which can reach objects without naming them".format(opcode.name, position))
            if opcode.name in MEMO_PUT_OPCODES and not 0 <= arg < len(data):
                raise RefusedPickle("stores memo index {} at byte {}, more than a {}-byte pickle can "
                                    "fill".format(arg, position, len(data)))
            if opcode.name == "FRAME" and arg > len(data) - position:
                raise RefusedPickle("declares a {}-byte frame at byte {} of a {}-byte pickle".format(
                    arg, position, len(data)))
            if opcode.name == "PROTO":
                if position != 0:
                    raise RefusedPickle("has a PROTO opcode at byte {}; pickle writes it only at byte 0".format(
                        position))
                protocol = arg
            stack.step(opcode, arg, position)
    except RefusedPickle:
        raise
    except Exception as error:  # pickletools raises ValueError (and others) on malformed input
        raise RefusedPickle("is malformed ({}: {})".format(type(error).__name__, error))
    return protocol


class _Stack(object):
    """The unpickler's stack and memo with each value replaced by its hash cost (a tuple's hash walks
    its elements, a long int's its digits; any other value costs 1: str and bytes cache their hash,
    placeholders hash by identity); refuses the pickle once hashing would pass the budget."""

    def __init__(self):
        self.items, self.marks, self.memo, self.hashed, self.keys = [], [], {}, 0, 0

    def pop_slice(self, opcode, position) -> list:
        """The values above the topmost MARK, the MARK removed (``stackslice`` in pickletools' terms)."""
        if not self.marks:
            raise RefusedPickle("is malformed ({} at byte {} without a MARK)".format(opcode.name, position))
        mark = self.marks.pop()
        values = self.items[mark:]
        del self.items[mark:]
        return values

    def check_top(self, opcode, position) -> None:
        """As the unpickler: a value must be on the stack above the topmost MARK."""
        if len(self.items) <= (self.marks[-1] if self.marks else 0):
            raise RefusedPickle("is malformed ({} at byte {} finds an empty stack)".format(opcode.name, position))

    def pop(self, opcode, position) -> int:
        self.check_top(opcode, position)
        return self.items.pop()

    def hash_costs(self, costs, position) -> None:
        self.keys += len(costs)
        if self.keys > MAX_HASHED_KEYS:
            raise RefusedPickle("makes the unpickler insert more than {} dict keys or set items by byte {} "
                                "(MAX_HASHED_KEYS; a builder's keyword arguments are a few)".format(
                                    MAX_HASHED_KEYS, position))
        self.hashed += sum(costs)
        if self.hashed > MAX_HASHED_NODES:
            raise RefusedPickle("makes the unpickler hash more than {} tuple elements by byte {} (keys built from "
                                "shared tuples; MAX_HASHED_NODES)".format(MAX_HASHED_NODES, position))

    def step(self, opcode, arg, position) -> None:
        """Apply one opcode: pop what pickletools says it pops, push what it pushes."""
        name = opcode.name
        if name in MEMO_PUT_OPCODES or name == "MEMOIZE":  # stores the top of the stack, which stays
            self.check_top(opcode, position)
            self.memo[len(self.memo) if name == "MEMOIZE" else arg] = self.items[-1]
            return
        before = [entry.name for entry in opcode.stack_before]
        sliced = self.pop_slice(opcode, position) if "mark" in before else []
        count = before.index("mark") if "mark" in before else len(before)
        popped = [self.pop(opcode, position) for _ in range(count)][::-1]
        if name in _HASHED_SLICES:
            self.hash_costs((sliced or popped[1:2])[::_HASHED_SLICES[name]], position)
        if name in MEMO_GET_OPCODES:
            if arg not in self.memo:
                raise RefusedPickle("is malformed ({} at byte {} reads memo index {}, never stored)".format(
                    name, position, arg))
            self.items.append(self.memo[arg])
        elif name == "MARK":
            self.marks.append(len(self.items))
        elif name == "DUP":
            self.items += popped * 2
        elif name in ("EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            self.items.append(min(1 + sum(sliced + popped), 2 * MAX_HASHED_NODES))
        elif name in ("INT", "LONG", "LONG1", "LONG4"):  # an int's hash reads every 30-bit digit, every use
            self.items.append(1 + arg.bit_length() // 30)
        else:
            self.items += [1] * len(opcode.stack_after)


def inspect_builder(data: bytes, allowed, callable_at_load=frozenset()) -> BuilderInfo:
    """Unpickle builder bytes with placeholders only; raise `RefusedPickle` unless every global
    is in ``allowed``, every call made while unpickling is in ``callable_at_load`` and the result
    has the shape Caffe2 needs: ``(callable, tuple, dict)``."""
    if not isinstance(data, bytes):
        raise RefusedPickle("is not bytes but {}".format(type(data).__name__))
    if len(data) > MAX_PICKLE_BYTES:
        raise RefusedPickle("is {} bytes, more than the {} a builder may take (MAX_PICKLE_BYTES)".format(
            len(data), MAX_PICKLE_BYTES))
    protocol = _static_check(data)
    unpickler = _RestrictedUnpickler(io.BytesIO(data), protocol, frozenset(allowed), frozenset(callable_at_load))
    try:
        value = unpickler.load()
    except RefusedPickle:
        raise
    except Exception as error:
        raise RefusedPickle("could not be read as a builder ({}: {})".format(type(error).__name__, error))
    if not (isinstance(value, tuple) and len(value) == 3):
        raise RefusedPickle("holds {!r}, not a builder tuple (func, args, kwargs)".format(type(value).__name__))
    func, args, kwargs = value
    if not isinstance(func, (Global, Call)):
        raise RefusedPickle("names no callable as its builder (found {})".format(type(func).__name__))
    if not isinstance(args, tuple) or not isinstance(kwargs, dict):
        raise RefusedPickle("holds a builder tuple whose args/kwargs are {}/{}, not tuple/dict".format(
            type(args).__name__, type(kwargs).__name__))
    if not all(isinstance(key, str) for key in kwargs):
        raise RefusedPickle("holds builder kwargs with non-string keys")
    return BuilderInfo(func.name if isinstance(func, Global) else func.func.name, args, kwargs)
