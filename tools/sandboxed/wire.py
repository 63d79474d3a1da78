"""The values that cross between the judge and the runner, and how they are framed.

    frame: [u64 length of the JSON][JSON][u32 number of buffers]([u64 length][bytes])*

Only values cross: None, bool, int, float, str, tuple, list, dict, NumPy arrays and scalars,
torch tensors, dtypes, and torch's own classes by name; anything else crosses as a handle
({"$": "obj"}: an id that only the sender can use). Decoding never unpickles or runs
anything, so a message from the untrusted runner can only be data. Every value is
validated as it crosses, both ways, at a bounded cost to the reader: an array keeps its
exact shape and an allow-listed dtype (NUMPY_KINDS), dict keys are strings (no key set
costs quadratic time), ints have 64 bits at most, and MAX_DEPTH, MAX_ITEMS, MAX_HEAD and
MAX_MESSAGE bound a message; a read waits at most until the reader's deadline. Anything else is a
ProtocolError, a failed check. torch is imported only to build a tensor, a torch dtype or
class: the runner of a NumPy-only submission never imports it.
"""

import functools
import json
import math
import select
import struct
import sys
import time
import types

import numpy as np

MAX_MESSAGE = 128 << 20  # bytes of a message in all; the checks' largest is 48 MiB (the
# measured call of 7.2 returns dx and its arguments grad_output and x, 16 MiB each)
MAX_HEAD = 1 << 20  # bytes of its JSON; the checks' largest is a few KiB
MAX_DEPTH = 32  # nesting of a value (a module's parameters: a list of tuples, depth 3)
MAX_ITEMS = 100_000  # items (list, tuple and dict entries) in one message's values
NUMPY_KINDS = "biufc"  # bool, int, unsigned, float, complex


def loaded_torch():
    """torch if this process has imported it, else None (then it holds no tensor)."""
    return sys.modules.get("torch")


def is_tensor(v):
    torch = loaded_torch()
    return torch is not None and isinstance(v, torch.Tensor)


@functools.cache
def torch_dtypes():
    """{"float32": torch.float32, ...}: the tensor dtypes that may cross (imports torch)."""
    import torch

    return {str(d).removeprefix("torch."): d for d in (
        torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
        torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
        torch.complex128)}


class ProtocolError(Exception):
    """A message that is not what the protocol allows (from a broken or forged runner)."""


def torch_class_name(cls):
    """"torch.nn.LayerNorm" for a class torch defines under torch.nn (its public name), else
    None: such classes cross by name (the norms the checks hand to the student's code)."""
    if isinstance(cls, type) and cls.__module__.startswith("torch.nn"):
        for prefix in ("torch.nn", "torch.nn.modules"):
            if getattr(_lookup(prefix), cls.__name__, None) is cls:
                return f"{prefix}.{cls.__name__}"
    return None


def _lookup(dotted):
    import torch

    value = torch
    for part in dotted.split(".")[1:]:
        value = getattr(value, part)
    return value


class Encoder:
    """Turns a value into a JSON tree and buffers; `export(obj)` gives the tree of an object
    that is not a value (the caller's handle for it)."""

    def __init__(self, export):
        self.export, self.buffers = export, []
        self.sources = {}  # buffer index: the array or tensor whose bytes it holds

    def _buffer(self, data, source=None):
        self.buffers.append(bytes(data))
        if source is not None:
            self.sources[len(self.buffers) - 1] = source
        return len(self.buffers) - 1

    def __call__(self, v):
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"$": "float", "repr": repr(v)}
        if isinstance(v, tuple):  # (torch.Size too)
            return {"$": "tuple", "items": [self(x) for x in v]}
        if isinstance(v, (list, types.GeneratorType)):  # (module.modules())
            return [self(x) for x in v]
        if isinstance(v, dict):  # (OrderedDict too: a state_dict)
            if not all(isinstance(k, str) for k in v):
                raise TypeError("a dict whose keys are not all str cannot cross to the judge")
            return {"$": "dict", "items": [[k, self(x)] for k, x in v.items()]}
        if isinstance(v, np.ndarray) and v.dtype.kind in NUMPY_KINDS:
            a = np.asarray(v, order="C")  # (not ascontiguousarray: it makes 0-d arrays 1-d)
            return {"$": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape),
                    "buf": self._buffer(a.reshape(-1).view(np.uint8) if a.size else b"", v)}
        if isinstance(v, np.generic) and v.dtype.kind in NUMPY_KINDS:
            return {"$": "npscalar", "dtype": v.dtype.str, "buf": self._buffer(v.tobytes())}
        if isinstance(v, np.dtype) or (isinstance(v, type) and issubclass(v, np.generic)):
            return {"$": "npdtype", "name": np.dtype(v).str}
        torch = loaded_torch()
        if torch is not None:
            if isinstance(v, torch.Tensor) and str(v.dtype).removeprefix("torch.") in \
                    torch_dtypes():
                return self.tensor(v)
            if isinstance(v, torch.dtype):
                return {"$": "tdtype", "name": str(v).removeprefix("torch.")}
            if isinstance(v, torch.device):
                return {"$": "device", "name": str(v)}
        if torch_class_name(v):
            return {"$": "class", "name": torch_class_name(v)}
        return self.export(v)

    def tensor(self, t):
        return {"$": "tensor", "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape), "grad": bool(t.requires_grad),
                "buf": self._buffer(raw_bytes(t), t)}


def raw_bytes(a):
    """The bytes of an array or tensor as they cross (C order)."""
    torch = loaded_torch()
    if torch is not None and isinstance(a, torch.Tensor):
        t = a.detach().cpu().contiguous()
        t = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
        return t.numpy().tobytes()
    return np.asarray(a, order="C").tobytes()


def numpy_dtype(name):
    """The NumPy dtype a message names: a plain number type (NUMPY_KINDS), else
    ProtocolError."""
    try:
        dtype = np.dtype(str(name))
    except (TypeError, ValueError, SyntaxError):
        raise ProtocolError("a dtype that is not allowed") from None
    if dtype.kind not in NUMPY_KINDS or dtype.fields or dtype.subdtype or dtype.str != name:
        raise ProtocolError("a dtype that is not allowed")
    return dtype


class Decoder:
    """Turns a JSON tree and its buffers back into values; `resolve(tree)` gives the object
    of an {"$": "obj"} or {"$": "yours"} tree (a proxy, or one of the receiver's own).
    `made[i]` is the array or tensor built from buffer i."""

    def __init__(self, buffers, resolve):
        self.buffers, self.resolve, self.made = buffers, resolve, {}
        self.items, self.depth = 0, 0

    def _count(self, items):
        self.items += len(items)
        if self.items > MAX_ITEMS:
            raise ProtocolError(f"a message of more than {MAX_ITEMS} items")
        return items

    def _bytes(self, tree, size):
        index = tree.get("buf")
        if not isinstance(index, int) or not 0 <= index < len(self.buffers):
            raise ProtocolError("a buffer index out of range")
        data = self.buffers[index]
        if len(data) != size:
            raise ProtocolError(f"a buffer of {len(data)} bytes, {size} expected")
        return data

    @staticmethod
    def _shape(tree):
        shape = tree.get("shape")
        if not (isinstance(shape, list) and len(shape) <= MAX_DEPTH and all(
                type(n) is int and 0 <= n < 2**40 for n in shape)):
            raise ProtocolError("a bad shape")
        return shape

    def __call__(self, t):
        if type(t) is int and not -2**63 <= t < 2**64:
            raise ProtocolError("an int of more than 64 bits")
        if t is None or isinstance(t, (bool, int, float, str)):
            return t
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise ProtocolError(f"a value nested more than {MAX_DEPTH} deep")
            return self._value(t)
        finally:
            self.depth -= 1

    def _value(self, t):
        if isinstance(t, list):
            return [self(x) for x in self._count(t)]
        if not isinstance(t, dict):
            raise ProtocolError(f"a value of JSON type {type(t).__name__}")
        kind = t.get("$")
        if kind == "float":
            if t.get("repr") not in ("nan", "inf", "-inf"):
                raise ProtocolError("a float that is not nan, inf or -inf")
            return float(t["repr"])
        if kind == "tuple":
            return tuple(self(x) for x in self._count(_list(t.get("items"))))
        if kind == "dict":
            pairs = self._count(_list(t.get("items")))
            if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
                       for p in pairs):
                raise ProtocolError("a dict's keys must be str")
            return {k: self(v) for k, v in pairs}
        if kind in ("ndarray", "npscalar"):
            dtype = numpy_dtype(t.get("dtype"))
            shape = self._shape(t) if kind == "ndarray" else []
            data = self._bytes(t, dtype.itemsize * math.prod(shape))
            a = np.frombuffer(data, dtype).reshape(shape).copy()  # writable, owned
            if kind == "npscalar":
                return a[()]
            self.made[t["buf"]] = a
            return a
        if kind in ("tensor", "device"):
            import torch
        if kind == "tensor":
            dtype = torch_dtypes().get(t.get("dtype"))
            if dtype is None:
                raise ProtocolError("a tensor dtype that is not allowed")
            shape = self._shape(t)
            raw = torch.int16 if dtype == torch.bfloat16 else dtype
            data = self._bytes(t, torch.empty(0, dtype=raw).element_size() * math.prod(shape))
            value = torch.frombuffer(bytearray(data), dtype=raw) if data else \
                torch.empty(0, dtype=raw)
            value = value.view(dtype).reshape(shape)
            if t.get("grad") and value.is_floating_point():
                value.requires_grad_()
            self.made[t["buf"]] = value
            return value
        if kind == "tdtype":
            if t.get("name") not in torch_dtypes():
                raise ProtocolError("a torch dtype that is not allowed")
            return torch_dtypes()[t["name"]]
        if kind == "npdtype":
            return numpy_dtype(t.get("name")).type
        if kind == "device":
            return torch.device(str(t["name"]))
        if kind == "class":
            name = str(t.get("name"))
            try:
                cls = _lookup(name) if name.startswith("torch.nn.") else None
            except AttributeError:
                cls = None
            if not isinstance(cls, type) or torch_class_name(cls) != name:
                raise ProtocolError("a class that is not allowed")
            return cls
        if kind in ("obj", "yours"):
            return self.resolve(t)
        raise ProtocolError("an unknown kind of value")


def _list(items):
    if not isinstance(items, list):
        raise ProtocolError("items must be a list")
    return items


def dumps(tree, buffers):
    """The frame of a message."""
    head = json.dumps(tree, allow_nan=False).encode()
    parts = [struct.pack("<Q", len(head)), head, struct.pack("<I", len(buffers))]
    for data in buffers:
        parts += [struct.pack("<Q", len(data)), data]
    return b"".join(parts)


def read_message(stream, deadline=None):
    """(tree, buffers) of the next frame on a binary stream; EOFError if it ended,
    TimeoutError if it did not come by `deadline` (time.monotonic(); the stream must then
    be unbuffered, so that select sees every byte not yet read)."""
    def exact(n):
        data, got = bytearray(n), 0
        view = memoryview(data)
        while got < n:
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([stream], [], [], wait)[0]:
                    raise TimeoutError("no message from the other side in time")
            count = stream.readinto(view[got:])
            if not count:
                raise EOFError("the other side closed the channel")
            got += count
        return data

    total = 0

    def sized(fmt, limit=MAX_MESSAGE):
        nonlocal total
        (n,) = struct.unpack(fmt, exact(struct.calcsize(fmt)))
        total += n
        if n > limit or total > MAX_MESSAGE:
            raise ProtocolError(f"a message over {limit} bytes")
        return n

    try:
        tree = json.loads(exact(sized("<Q", MAX_HEAD)))
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"not JSON: {error}") from None
    count = struct.unpack("<I", exact(4))[0]
    if count > MAX_ITEMS:
        raise ProtocolError("too many buffers")
    return tree, [exact(sized("<Q")) for _ in range(count)]
