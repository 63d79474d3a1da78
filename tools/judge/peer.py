"""One end of the channel between the judge and the worker: requests, replies, handles
and gradients across it. The same class runs on both sides.

- The judge asks the worker to import a student module, get or set an attribute, call a
  function or method, and fetch or set a module's parameters. The worker asks the judge
  only to call back what the judge handed it (a sublayer, a norm, a counting wrapper).
  A side waiting for its reply serves the other side's requests meanwhile, so callbacks
  nest.
- Objects that are not values cross as handles; the other side sees a proxy (`Remote`,
  or `RemoteModule` for a torch module, in torch_proxies.py) whose attributes and calls
  are requests.
- A call whose tensor arguments require grad crosses as one autograd node (`Bridge`):
  the callee keeps the graph; backward sends the output gradients and gets the input
  gradients back (parameters' gradients accumulate on the callee's side, as they would).
- Arrays and tensors the callee wrote into (running statistics updated in place, or an
  input a kernel must not touch) are copied back into the caller's, so the check sees it.
"""

import contextlib
import importlib
import itertools
import re
import tracemalloc
import types

import numpy as np

from tools.judge.wire import (
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


class RemoteError(Exception):
    """An exception raised on the other side, of a class that is not a builtin one (its
    class, made here, has the other side's class name)."""


def remote_error(name, message):
    """The exception to raise for an error the other side reported."""
    name, message = str(name)[:100], str(message)[:MESSAGE_CHARS]
    if name in _BUILTIN_ERRORS:
        return _BUILTIN_ERRORS[name](message)
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        name = "RemoteError"
    return type(name, (RemoteError,), {})(message)


class WorkerGone(Exception):
    """The channel closed: the other process ended, was killed, or broke the protocol."""


def tensors_in(value):
    """The tensors in a value, in the order Encoder meets them."""
    if is_tensor(value):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from tensors_in(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from tensors_in(k)
            yield from tensors_in(v)


def _copy_back(original, value):
    """Write a callee's final value of an argument into the caller's array or tensor (only
    if it has the same shape and dtype: an argument cannot change those in place)."""
    if isinstance(original, np.ndarray) and isinstance(value, np.ndarray):
        if original.shape == value.shape and original.dtype == value.dtype:
            np.copyto(original, value)
    elif is_tensor(original) and is_tensor(value):
        if original.shape == value.shape and original.dtype == value.dtype:
            with loaded_torch().no_grad():
                original.copy_(value)


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


class Remote:
    """A proxy of an object on the other side: attributes and calls are requests."""

    def __init__(self, peer, handle, info):
        object.__setattr__(self, "_peer", peer)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_info", info)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._peer.request("getattr", self, name)

    def __setattr__(self, name, value):
        self._peer.request("setattr", self, name, value)

    def __call__(self, *args, **kwargs):
        return self._peer.call(self, args, kwargs)

    def remote_peak_memory(self, *args):
        """(self(*args), the bytes it allocated at its peak), measured where it runs (see
        normlib.testing.peak_memory)."""
        return self._peer.request("peak", self, args)

    def __repr__(self):
        return f"<remote {self._info.get('type', 'object')}>"


class Peer:
    """One end of a channel: `reader`, `writer` (binary streams); `serves` (the request
    kinds this side answers: the judge answers only callbacks into what it handed over)."""

    def __init__(self, reader, writer, serves):
        self.reader, self.writer, self.serves = reader, writer, set(serves)
        self.exports, self._ids, self._count = {}, {}, itertools.count(1)
        self.proxies, self.graphs, self._seq = {}, {}, itertools.count(1)

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
                raise ProtocolError(f"no object {handle!r} was handed over")
            return self.exports[handle]
        if not isinstance(handle, int):
            raise ProtocolError("a handle must be an int")
        info = {k: tree.get(k) for k in ("kind", "type", "torch_class")
                if isinstance(tree.get(k), str)}
        if handle not in self.proxies:
            if info.get("kind") == "module":
                from tools.judge.torch_proxies import RemoteModule as cls
            else:
                cls = Remote
            self.proxies[handle] = cls(self, handle, info)
        return self.proxies[handle]

    # -- messages ------------------------------------------------------------------------
    def _write(self, tree, buffers):
        try:
            self.writer.write(dumps(tree, buffers))
            self.writer.flush()
        except OSError as error:  # a broken pipe: the other side ended, as for _read's EOF
            raise WorkerGone(str(error)) from None

    def _read(self):
        try:
            return read_message(self.reader)
        except (EOFError, OSError, ProtocolError) as error:
            raise WorkerGone(str(error)) from None

    def frame(self, op, *args):
        """An encoded request, and the arrays and tensors whose bytes it carries."""
        encoder = Encoder(self._export)
        tree = encoder(list(args))
        return {"op": op, "seq": next(self._seq), "args": tree}, encoder

    def request(self, op, *args):
        """Send a request; serve the other side's requests until its reply; its value."""
        return self.send_request(self.frame(op, *args))["value"]

    def send_request(self, frame):
        (message, encoder) = frame
        self._write(message, encoder.buffers)
        while True:
            tree, buffers = self._read()
            if not isinstance(tree, dict):
                raise WorkerGone("a message that is not an object")
            if "op" in tree:
                self._serve(tree, buffers)
                continue
            if tree.get("re") != message["seq"]:
                raise WorkerGone(f"a reply to {tree.get('re')!r}, {message['seq']} expected")
            if "error" in tree:
                name, text = (list(tree["error"]) + ["", ""])[:2]
                raise remote_error(name, text)
            decoder = Decoder(buffers, self._resolve)
            try:
                reply = {k: decoder(v) if k in ("value", "changed") else v
                         for k, v in tree.items()}
            except (ProtocolError, ValueError, TypeError, KeyError, AttributeError,
                    RecursionError) as error:
                raise WorkerGone(f"a reply that is not a value ({error})") from None
            for index, value in reply.get("changed") or []:
                _copy_back(encoder.sources.get(index), value)
            return reply

    def call(self, target, args, kwargs):
        """target(*args, **kwargs) on the other side, as one autograd node if grad is on
        and a tensor argument requires it."""
        torch = loaded_torch()
        grad = torch is not None and torch.is_grad_enabled()
        message, encoder = self.frame("call", target, args, kwargs, grad)
        leaves = [t for t in encoder.sources.values() if is_tensor(t) and t.requires_grad]
        if not (grad and leaves):
            return self.send_request((message, encoder))["value"]
        from tools.judge.torch_proxies import Bridge

        holder = {}
        outputs = Bridge.apply(self, (message, encoder), holder, *leaves)
        return _replace_tensors(holder["result"], iter(outputs))

    # -- serving -------------------------------------------------------------------------
    def serve_forever(self):
        while True:
            tree, buffers = self._read()
            if not isinstance(tree, dict) or "op" not in tree:
                raise WorkerGone("expected a request")
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
        except WorkerGone:
            raise
        except BaseException as error:  # SystemExit, KeyboardInterrupt from student code too
            self._write({"re": seq, "error": [type(error).__name__,
                                              str(error)[:MESSAGE_CHARS]]}, [])

    def _op_import(self, name):
        if not re.fullmatch(r"normlib(\.\w+)?", str(name)):
            raise ImportError(f"only normlib modules are imported here, not {name!r}")
        return {"value": importlib.import_module(name)}

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
        if pairs:
            loaded_torch().autograd.backward([o for o, _ in pairs], [g for _, g in pairs],
                                    retain_graph=True)
        return {"value": [leaf.grad for leaf in leaves]}

    def _op_params(self, module):
        return {"value": [(name, p, p.grad) for name, p in module.named_parameters()]}

    def _op_setparams(self, module, values):
        params = dict(module.named_parameters())
        with loaded_torch().no_grad():
            for name, value in values.items():
                params[name].copy_(value)
        return {"value": None}

    def _op_peak(self, target, args):
        tracing = tracemalloc.is_tracing()
        if not tracing:
            tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            result = target(*args)
            peak = tracemalloc.get_traced_memory()[1] - before
        finally:
            if not tracing:
                tracemalloc.stop()
        return {"value": (result, peak)}

    def _op_reset(self):
        self.graphs.clear()
        return {"value": None}
