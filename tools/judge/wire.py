"""The values that cross between the judge and the worker, and how they are framed.

A message is a JSON tree plus raw buffers (the bytes of arrays and tensors). Only values
cross: None, bool, int, float, str, tuple, list, dict, NumPy arrays and scalars, torch
tensors, dtypes, and torch's own classes by name. Anything else crosses as a handle
({"$": "obj"}: an id in the sender's table, which only the sender can use). Decoding
builds arrays from bytes with an allow-listed dtype and looks names up in torch; it never
unpickles or runs anything, so a message from the untrusted worker can only be data.

torch is imported only where a tensor, a torch dtype or a torch class must be built: a
process that has not imported torch holds none of them, so the worker of a NumPy-only
submission never imports it (2.5 s of CPU per worker). The judge always has.

    frame: [u64 length of the JSON][JSON][u32 number of buffers]([u64 length][bytes])*
"""

import functools
import json
import math
import struct
import sys
import types

import numpy as np

MAX_MESSAGE = 512 << 20  # bytes; the checks' largest message is a few MiB
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
    """A message that is not what the protocol allows (from a broken or forged worker)."""


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
            return {"$": "dict", "items": [[self(k), self(x)] for k, x in v.items()]}
        if isinstance(v, np.ndarray) and v.dtype.kind in NUMPY_KINDS:
            a = np.ascontiguousarray(v)
            return {"$": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape),
                    "buf": self._buffer(a.view(np.uint8).reshape(-1) if a.size else b"", v)}
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
    return np.ascontiguousarray(a).tobytes()


class Decoder:
    """Turns a JSON tree and its buffers back into values; `resolve(tree)` gives the object
    of an {"$": "obj"} or {"$": "yours"} tree (a proxy, or one of the receiver's own).
    `made[i]` is the array or tensor built from buffer i."""

    def __init__(self, buffers, resolve):
        self.buffers, self.resolve, self.made = buffers, resolve, {}

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
        if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
            raise ProtocolError(f"bad shape {shape!r}")
        return shape

    def __call__(self, t):
        if t is None or isinstance(t, (bool, int, float, str)):
            return t
        if isinstance(t, list):
            return [self(x) for x in t]
        if not isinstance(t, dict):
            raise ProtocolError(f"unexpected {type(t).__name__}")
        kind = t.get("$")
        if kind == "float":
            return float(t["repr"])  # "nan", "inf", "-inf"
        if kind == "tuple":
            return tuple(self(x) for x in t["items"])
        if kind == "dict":
            return {self(k): self(v) for k, v in t["items"]}
        if kind in ("ndarray", "npscalar"):
            dtype = np.dtype(str(t["dtype"]))
            if dtype.kind not in NUMPY_KINDS:
                raise ProtocolError(f"dtype {dtype} not allowed")
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
                raise ProtocolError(f"tensor dtype {t.get('dtype')!r} not allowed")
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
                raise ProtocolError(f"torch dtype {t.get('name')!r} not allowed")
            return torch_dtypes()[t["name"]]
        if kind == "npdtype":
            dtype = np.dtype(str(t["name"]))
            if dtype.kind not in NUMPY_KINDS:
                raise ProtocolError(f"dtype {dtype} not allowed")
            return dtype.type
        if kind == "device":
            return torch.device(str(t["name"]))
        if kind == "class":
            name = str(t.get("name"))
            try:
                cls = _lookup(name) if name.startswith("torch.nn.") else None
            except AttributeError:
                cls = None
            if not isinstance(cls, type) or torch_class_name(cls) != name:
                raise ProtocolError(f"class {name!r} not allowed")
            return cls
        if kind in ("obj", "yours"):
            return self.resolve(t)
        raise ProtocolError(f"unknown value kind {kind!r}")


def dumps(tree, buffers):
    """The frame of a message."""
    head = json.dumps(tree, allow_nan=False).encode()
    parts = [struct.pack("<Q", len(head)), head, struct.pack("<I", len(buffers))]
    for data in buffers:
        parts += [struct.pack("<Q", len(data)), data]
    return b"".join(parts)


def read_message(stream):
    """(tree, buffers) of the next frame on a binary stream; EOFError if it ended."""
    def exact(n):
        data = stream.read(n)
        if len(data) != n:
            raise EOFError("the other side closed the channel")
        return data

    total = 0

    def sized(fmt):
        nonlocal total
        (n,) = struct.unpack(fmt, exact(struct.calcsize(fmt)))
        total += n
        if total > MAX_MESSAGE:
            raise ProtocolError(f"a message over {MAX_MESSAGE >> 20} MiB")
        return n

    try:
        tree = json.loads(exact(sized("<Q")))
    except (ValueError, RecursionError) as error:
        raise ProtocolError(f"not JSON: {error}") from None
    count = struct.unpack("<I", exact(4))[0]
    if count > 100_000:
        raise ProtocolError("too many buffers")
    return tree, [exact(sized("<Q")) for _ in range(count)]
