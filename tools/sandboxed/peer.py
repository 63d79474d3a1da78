"""One end of the channel between the judge and the runner: requests, replies, handles
and gradients across it. The same class runs on both sides.

- The judge asks the runner to import a student module, get or set an attribute, call,
  and fetch or set a module's parameters; the runner asks the judge only to call back what
  it was handed. A side waiting for its reply serves the other's requests, so calls nest.
- Objects that are not values cross as handles, seen as proxies (remote.py's `Remote`,
  torch_proxies.py's `RemoteModule`); a call whose tensors require grad crosses as one
  autograd node (`Bridge`): backward sends the output gradients, gets the input ones back.
- Nothing flows back unasked: the callee gets copies, and only the arguments a call
  declares as `updates` (running statistics) receive what it wrote; a write into any other
  fails the call, and the caller's objects stay as they were.
- The judge's end is `untrusted`: it keeps only the builtin type of an error the runner
  reports, never its message, and waits for each message only until its `deadline`.
"""

import contextlib
import gc
import importlib
import itertools
import mmap
import os
import re
import sys
import types
from dataclasses import dataclass

import numpy as np

from tools.sandboxed import compile_step
from tools.sandboxed.remote import Remote, tensors_in
from tools.sandboxed.wire import (
    Decoder,
    Encoder,
    ProtocolError,
    dumps,
    is_tensor,
    loaded_torch,
    raw_bytes,
    read_message,
    torch_class_name,
)

MESSAGE_CHARS = 2000  # of an error crossing back
_BUILTIN_ERRORS = {e.__name__: e for e in (
    AssertionError, AttributeError, ImportError, IndexError, KeyError, LookupError,
    MemoryError, ModuleNotFoundError, NameError, NotImplementedError, OverflowError,
    RecursionError, RuntimeError, StopIteration, SyntaxError, TypeError, ValueError,
    ZeroDivisionError, FloatingPointError, ArithmeticError, UnboundLocalError)}


ENDED = "the submission's code ended its process"  # (what broke a channel: Peer.broken)
SILENT = "no answer in time"
BROKE = "the runner broke the protocol:"
UNQUOTED = "(raised by the submission's code; the judge does not read its message)"


# A measuring runner's (tools/sandboxed/runner.py --numba): (Numba's dispatcher class, its compile
# method, numba.typeof, compile_step.state()), saved before any student code runs; () where
# no compiled kernel is measured
NUMBA = ()


class RemoteError(Exception):
    """An exception raised on the other side. Its class, made here, is a subclass of the
    builtin one of that name (so that `except ValueError` catches a remote ValueError),
    or of RemoteError alone for a class of the other side's own."""


def remote_error(name, message, quote=True):
    """The exception to raise for an error the other side reported (quote=False: without
    its message, UNQUOTED instead, and a class of its own named RemoteError)."""
    name = name if isinstance(name, str) and name in _BUILTIN_ERRORS else None
    if quote:
        message = str(message)[:MESSAGE_CHARS]
    else:
        message = UNQUOTED
    if name is None:
        return RemoteError(message)
    return type(name, (_BUILTIN_ERRORS[name], RemoteError), {})(message)


class RunnerGone(Exception):
    """The channel closed: the other process ended, was killed, or broke the protocol."""


def _describe(a):
    kind = "tensor" if is_tensor(a) else "array"
    return f"a {tuple(a.shape)} {a.dtype} {kind}"


def _copy_back(original, value, updates):
    """Write a callee's final value of an argument into the caller's array or tensor, if
    the call declared it as updated in place (its id is in updates) and the value has its
    type, shape and dtype; else the call fails, and the caller's stays as it was."""
    if not any(original is u for u in updates):
        raise AssertionError(f"the call wrote into one of its arguments ({_describe(original)}"
                             "), which it must not change: a kernel must not write into its "
                             "inputs")
    if type(original) is not type(value) or original.shape != value.shape or \
            original.dtype != value.dtype:
        raise AssertionError(f"the call changed the shape, dtype or type of an argument it "
                             f"updates in place ({_describe(original)})")
    if is_tensor(original):
        with loaded_torch().no_grad():
            original.copy_(value)
    else:
        np.copyto(original, value)


def _replace_tensors(value, new):
    """value with its tensors replaced, in order, by those of the iterator `new`."""
    if is_tensor(value):
        return next(new)
    if isinstance(value, tuple):
        return tuple(_replace_tensors(v, new) for v in value)
    if isinstance(value, list):
        return [_replace_tensors(v, new) for v in value]
    if isinstance(value, dict):
        return {_replace_tensors(k, new): _replace_tensors(v, new) for k, v in value.items()}
    return value


@dataclass
class Frame:
    """A request to send: its message, the Encoder that made it (its buffers, and the
    caller's arrays and tensors they came from), and the arguments it may update in place."""
    message: dict
    encoder: Encoder
    updates: tuple = ()


class Peer:
    """One end of a channel: `reader`, `writer` (binary streams); `serves` (the request
    kinds this side answers: the judge answers only callbacks into what it handed over);
    `untrusted`: the other side is the runner (see the module's docstring). `deadline`
    (time.monotonic(), None: no limit): when a read gives up (the judge sets it for each
    check; `reader` must then be unbuffered). `broken`: None, or what broke the channel
    (the other side ended, fell silent or broke the protocol): nothing more crosses it."""

    def __init__(self, reader, writer, serves, untrusted=False):
        self.reader, self.writer, self.serves = reader, writer, set(serves)
        self.untrusted, self.deadline, self.broken = untrusted, None, None
        self.exports, self._ids, self._count = {}, {}, itertools.count(1)
        self.proxies, self.graphs, self._seq = {}, {}, itertools.count(1)
        self.measurer = None  # the judge's: (remote function, args) -> (result, bytes)
        self.sourcer = None  # the judge's: remote function -> (its file's text, its name)
        self.arguments = self.result = None  # a measuring runner's call (_op_map, _op_run)

    # -- values ------------------------------------------------------------------------
    def _export(self, obj):
        if isinstance(obj, Remote) and object.__getattribute__(obj, "_peer") is self:
            return {"$": "yours", "id": object.__getattribute__(obj, "_handle")}
        key = id(obj)
        if key not in self._ids:
            handle = next(self._count)
            self._ids[key], self.exports[handle] = handle, obj
        torch = loaded_torch()
        kind = ("module" if torch is not None and isinstance(obj, torch.nn.Module) else
                "class" if isinstance(obj, type) else "callable" if callable(obj) else "object")
        return {"$": "obj", "id": self._ids[key], "kind": kind,
                "type": type(obj).__name__, "torch_class": torch_class_name(type(obj))}

    def _resolve(self, tree):
        handle = tree.get("id")
        if tree["$"] == "yours":
            if handle not in self.exports:
                raise ProtocolError("a handle of an object that was not handed over")
            return self.exports[handle]
        if not isinstance(handle, int):
            raise ProtocolError("a handle must be an int")
        info = {k: tree.get(k) for k in ("kind", "torch_class") if isinstance(tree.get(k), str)}
        if info.get("kind") not in ("module", "class", "callable", "object"):
            info["kind"] = "object"
        if handle not in self.proxies:
            if info.get("kind") == "module":
                from tools.sandboxed.torch_proxies import RemoteModule as cls
            else:
                cls = Remote
            self.proxies[handle] = cls(self, handle, info)
        return self.proxies[handle]

    # -- messages ------------------------------------------------------------------------
    def _write(self, tree, buffers):
        if self.broken:
            raise RunnerGone(self.broken)
        data = memoryview(dumps(tree, buffers))
        try:
            while data:  # (an unbuffered writer may take part of it)
                data = data[self.writer.write(data):]
            self.writer.flush()
        except OSError:  # a broken pipe: the other side ended, as for _read's EOF
            self._break(ENDED)

    def _read(self):
        if self.broken:
            raise RunnerGone(self.broken)
        try:
            return read_message(self.reader, self.deadline)
        except TimeoutError:
            self._break(SILENT)
        except (EOFError, OSError):
            self._break(ENDED)
        except ProtocolError as error:
            self._broke(error)

    def _break(self, why):
        self.broken = why
        raise RunnerGone(why) from None

    def _broke(self, why):
        self._break(f"{BROKE} {why}")

    def frame(self, op, *args, updates=()):
        """The Frame of a request."""
        encoder = Encoder(self._export)
        tree = encoder(list(args))
        return Frame({"op": op, "seq": next(self._seq), "args": tree}, encoder, updates)

    def request(self, op, *args):
        """Send a request; serve the other side's requests until its reply; its value."""
        return self.send_request(self.frame(op, *args))["value"]

    def send_request(self, frame):
        self._write(frame.message, frame.encoder.buffers)
        while True:
            tree, buffers = self._read()
            if not isinstance(tree, dict):
                self._broke("a message that is not an object")
            if "op" in tree:
                self._serve(tree, buffers)
                continue
            if tree.get("re") != frame.message["seq"]:
                self._broke("a reply to another request")
            if "error" in tree:
                error = tree["error"]
                if not (isinstance(error, list) and len(error) == 2):
                    self._broke("an error that is not [name, message]")
                raise remote_error(*error, quote=not self.untrusted)
            return self._reply(tree, buffers, frame)

    def _reply(self, tree, buffers, frame):
        """A reply's fields, its values decoded, validated; what the callee wrote into
        arguments copied back (see _copy_back)."""
        graph, diff = tree.get("graph"), tree.get("diff", [])
        if not (graph is None or type(graph) is int) or not (
                isinstance(diff, list) and all(type(d) is bool for d in diff)):
            self._broke("a reply whose graph or diff is not what a call returns")
        decoder = Decoder(buffers, self._resolve)
        try:
            value, changed = decoder(tree.get("value")), decoder(tree.get("changed", []))
        except ProtocolError as error:
            self._broke(error)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
            self._broke("a reply that is not a value")
        if not (isinstance(changed, list) and all(
                isinstance(c, list) and len(c) == 2 and type(c[0]) is int for c in changed)):
            self._broke("a reply whose changed arguments are not [index, value] pairs")
        for index, new in changed:
            if index in frame.encoder.sources:
                _copy_back(frame.encoder.sources[index], new, frame.updates)
        return {"value": value, "graph": graph, "diff": diff}

    def call(self, target, args, kwargs, updates=()):
        """target(*args, **kwargs) on the other side, as one autograd node if grad is on
        and a tensor argument requires it; updates: the arrays or tensors among the
        arguments that it may write into (see _copy_back)."""
        torch = loaded_torch()
        grad = torch is not None and torch.is_grad_enabled()
        frame = self.frame("call", target, args, kwargs, grad, updates=tuple(updates))
        leaves = [t for t in frame.encoder.sources.values() if is_tensor(t) and t.requires_grad]
        if not (grad and leaves):
            return self.send_request(frame)["value"]
        from tools.sandboxed.torch_proxies import Bridge

        holder = {}
        outputs = Bridge.apply(self, frame, holder, *leaves)
        return _replace_tensors(holder["result"], iter(outputs))

    # -- serving -------------------------------------------------------------------------
    def serve_forever(self):
        while True:
            tree, buffers = self._read()
            if not isinstance(tree, dict) or "op" not in tree:
                raise RunnerGone("expected a request")
            self._serve(tree, buffers)

    def _serve(self, tree, buffers):
        seq, op = tree.get("seq"), tree.get("op")
        reply = {"re": seq}
        try:
            if op not in self.serves:
                raise PermissionError(f"{op!r} is not served here")
            decoder = Decoder(buffers, self._resolve)
            args = decoder(tree.get("args"))
            if not isinstance(args, list):
                raise ProtocolError("arguments must be a list")
            self._made = decoder.made
            reply.update(getattr(self, "_op_" + op)(*args))
            reply["changed"] = [[i, v] for i, v in decoder.made.items()
                                if raw_bytes(v) != buffers[i]]
            encoder = Encoder(self._export)
            out = {k: encoder(v) if k in ("value", "changed") else v for k, v in reply.items()}
            self._write(out, encoder.buffers)
        except RunnerGone:
            raise
        except BaseException as error:  # SystemExit, KeyboardInterrupt from student code too
            self._write({"re": seq, "error": [type(error).__name__,
                                              str(error)[:MESSAGE_CHARS]]}, [])

    def _op_import(self, name):
        if not re.fullmatch(r"normlib(\.\w+)?", str(name)):
            raise ImportError(f"only normlib modules are imported here, not {name!r}")
        module = importlib.import_module(name)
        gc.freeze()  # (what the import made, torch's modules, lives as long as the runner:
        # the collector need not scan it again on every collection, 0.1 s each with torch;
        # and, in a measuring runner, garbage the import left is never collected, so no
        # finalizer of the student's runs during the compile step the measure leaves out:
        # one that did, outside the sandbox, made room for a kernel's temporaries unseen)
        return {"value": module}

    def _op_getattr(self, target, name):
        return {"value": getattr(target, str(name))}

    def _op_setattr(self, target, name, value):
        setattr(target, str(name), value)
        return {"value": None}

    def _op_call(self, target, args, kwargs, grad):
        if not any(target is obj for obj in self.exports.values()):
            raise PermissionError("only what was handed over can be called")
        leaves = [t for t in self._made.values() if is_tensor(t) and t.requires_grad]
        # grad off needs torch; grad on is what a torch imported during the call starts with
        torch = importlib.import_module("torch") if not grad else loaded_torch()
        with torch.set_grad_enabled(bool(grad)) if torch else contextlib.nullcontext():
            value = target(*args, **kwargs)
        if isinstance(value, types.GeneratorType):
            value = list(value)
        if not (grad and leaves):
            return {"value": value}
        outputs = list(tensors_in(value))
        graph = next(self._count)
        self.graphs[graph] = (leaves, outputs)
        return {"value": value, "graph": graph, "diff": [t.requires_grad for t in outputs]}

    def _op_backward(self, graph, grads):
        if graph not in self.graphs:
            raise ValueError("no such graph (was it reset?)")
        leaves, outputs = self.graphs[graph]
        pairs = [(o, g) for o, g in zip(outputs, grads) if o.requires_grad and is_tensor(g)]
        for leaf in leaves:
            leaf.grad = None
        for o, g in pairs:
            if o.shape != g.shape:
                raise ValueError(f"a gradient of shape {tuple(g.shape)} for an output of shape "
                                 f"{tuple(o.shape)}")
        if pairs:  # sum(o * g)'s gradient is exactly g at each o: the vector-Jacobian
            # product, without torch.autograd.backward's gradient arguments, whose check
            # imports sympy (0.3 s of every runner's time); with grad mode on, which a
            # backward pass (a callback from one) turns off
            torch = loaded_torch()
            with torch.enable_grad():
                total = sum((o * g).sum() for o, g in pairs)
            total.backward(retain_graph=True)
        return {"value": [leaf.grad for leaf in leaves]}

    def _op_params(self, module):
        return {"value": [(name, p, p.grad) for name, p in module.named_parameters()]}

    def _op_setparams(self, module, values):
        params = dict(module.named_parameters())
        with loaded_torch().no_grad():
            for name, value in values.items():
                params[name].copy_(value)
        return {"value": None}

    # a measuring runner (tools.judge.judge.Judge.measure): the arguments arrive first, then
    # the judge takes the runner's memory, then the call runs, the student's module imported
    # by it (no student code ran before), then the judge reads the memory's peak
    def _op_map(self, *args):
        """The call's arguments, each array ({"$offset": offset, "shape", "dtype", "fd"}:
        tools.judge.judge.arguments_file) mapped copy-on-write from the file whose descriptor the
        judge handed over, its pages read in, the descriptor closed: what the call writes
        into them is copied, and counted, and no path leads back to the file."""
        arguments, mapped = [], {}
        for a in args:
            if isinstance(a, dict) and "$offset" in a:
                if a["fd"] not in mapped:
                    mapped[a["fd"]] = mmap.mmap(a["fd"], 0, flags=mmap.MAP_PRIVATE,
                                                prot=mmap.PROT_READ | mmap.PROT_WRITE)
                    np.frombuffer(mapped[a["fd"]], np.uint8)[::mmap.PAGESIZE].sum()
                a = np.ndarray(tuple(a["shape"]), np.dtype(a["dtype"]),
                               buffer=mapped[a["fd"]], offset=a["$offset"])
            arguments.append(a)
        for fd in mapped:
            os.close(fd)
        self.arguments = tuple(arguments)
        return {"value": None}

    def _op_load(self, module):
        """A compiled kernel's measured call, first step: its module imported (its memory
        measured on its own: Judge._measured)."""
        self._op_import(module)
        return {"value": None}

    def _op_compile(self, module, name):
        """Second step: the kernel compiled by Numba for the mapped arguments' types, before
        the judge takes the memory again: what the compiler allocates is not the kernel's.
        Only where the module is a module and the kernel one of Numba's dispatchers, found
        in the module's own namespace, compiled by Numba's own methods (NUMBA: kept by the
        runner before any student code ran, so that no attribute or method of the
        student's runs here); a kernel compiled at import (an explicit signature) is
        compiled already. No code of the student's may run meanwhile
        (tools/sandboxed/compile_step.py): the value is None, or the key of what would
        have run or ran (compile_step.REFUSED), which the judge words."""
        found = sys.modules.get(str(module))
        function = vars(found).get(str(name)) if type(found) is types.ModuleType else None
        if NUMBA and type(function) is NUMBA[0] and function._can_compile:
            dispatcher, compile_, typeof, before = NUMBA
            signature = tuple(typeof(a) for a in self.arguments)
            refused = compile_step.refusal(before) or \
                compile_step.foreign(function, dispatcher, before) or \
                compile_step.compile_quietly(compile_, function, signature, before)
            return {"value": refused}
        return {"value": None}

    def _op_run(self, module, name):
        function = getattr(self._op_import(module)["value"], str(name))
        self.result = function(*self.arguments)
        return {"value": None}

    def _op_fetch(self):
        """The call's result, and its arguments as they are now (to tell if it wrote there)."""
        return {"value": (self.result, list(self.arguments))}

    def _op_reset(self):
        """Between checks: no graphs kept. Before a measured call (a runner serving "map"):
        no garbage left for the collector to free during the call (and, the reply sent once
        the last request's buffers are freed, a runner at rest). Only there: a collection
        with torch imported takes about 0.1 s, which every check would pay."""
        self.graphs.clear()
        if "map" in self.serves:
            gc.collect()
        return {"value": None}
