"""What may cross between the judge and the runner (tools/sandboxed/wire.py) and what a call
across gives back (tools/sandboxed/peer.py): every value validated as it crosses, nothing
written back unasked, no message of the runner's kept by the judge.

The attacks of a hostile class that broke grading, at the level where each is refused
(tests/test_judge.py grades submissions that try them):
- a 0-d array crossed as a 1-d one (np.ascontiguousarray): shapes are exact now;
- a dict of 130,000 int keys hashing alike stalled the judge's decoding: keys are str;
- a 64 MiB frame of empty lists took the judge to 1.9 GB: the JSON head is capped at
  1 MiB, refused from its length alone;
- the runner chose which of the judge's arrays to overwrite (copy-back): only a call's
  declared updates receive what it wrote;
- an exception's message carried hidden data into the verdict: the judge's end keeps
  only a builtin type name.
"""

import io
import json
import os
import struct
import threading
import time

import numpy as np
import pytest
import torch

from tools.sandboxed import wire
from tools.sandboxed.peer import UNQUOTED, Peer, Remote, RemoteError
from tools.sandboxed.wire import Decoder, Encoder, ProtocolError, dumps, read_message


def crossed(value):
    """value after a trip across: encoded, framed, read back, decoded."""
    encoder = Encoder(lambda obj: pytest.fail(f"{obj!r} crossed as a handle"))
    tree = encoder(value)
    frame = io.BytesIO(dumps(tree, encoder.buffers))
    tree, buffers = read_message(frame)
    return Decoder(buffers, None)(tree)


@pytest.mark.parametrize("value", [
    np.array(2.5, np.float32),  # 0-d: the forged (1,) statistics were this
    np.zeros((0, 3), np.float64),
    np.arange(12, dtype=">f4").reshape(3, 4),  # big-endian: its own dtype, not float32
    np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2],  # a strided view
    np.ma.masked_array([1.0, 2.0], mask=[True, False]),  # a subclass: the plain array
    torch.ones((), dtype=torch.float64), torch.zeros((2, 0, 3), dtype=torch.bfloat16),
], ids=["0-d", "empty", "big-endian", "strided", "masked", "0-d tensor", "bfloat16"])
def test_arrays_cross_with_their_exact_shape_dtype_and_type(value):
    back = crossed(value)
    assert type(back) in (np.ndarray, torch.Tensor) and type(back) is (
        torch.Tensor if isinstance(value, torch.Tensor) else np.ndarray)
    assert back.shape == value.shape and back.dtype == value.dtype
    assert (back == np.asarray(value)).all() if isinstance(back, np.ndarray) else \
        torch.equal(back, value)


def test_a_scalar_a_0d_array_and_a_tuple_stay_what_they_were():
    back = crossed([np.float32(1.5), np.array(1.5, np.float32), (1, 2), [1, 2], {"a": 1}])
    assert type(back[0]) is np.float32 and type(back[1]) is np.ndarray
    assert back[1].shape == () and back[2:] == [(1, 2), [1, 2], {"a": 1}]


def test_a_dict_crosses_with_str_keys_only():
    with pytest.raises(TypeError, match="keys"):
        Encoder(None)({1: "a"})


def refused(tree, buffers=()):
    with pytest.raises(ProtocolError) as error:
        Decoder(list(buffers), lambda t: None)(tree)
    return str(error.value)


def test_the_hash_collision_dict_is_refused_before_any_key_is_hashed():
    # 130,000 int keys that hash alike (multiples of 2**61 - 1): a dict of them costs
    # quadratic time to build; str keys are hashed with a random key
    items = [[k * (2**61 - 1), 0] for k in range(130_000)]
    assert "str" in refused({"$": "dict", "items": items[:10]})
    assert "items" in refused({"$": "dict", "items": items})  # (more than MAX_ITEMS)


@pytest.mark.parametrize("tree, why", [
    ({"$": "ndarray", "dtype": "[('a', '<f4')]", "shape": [1], "buf": 0}, "dtype"),
    ({"$": "ndarray", "dtype": "(2,)<f4", "shape": [1], "buf": 0}, "dtype"),
    ({"$": "ndarray", "dtype": "float32", "shape": [1], "buf": 0}, "dtype"),  # not .str
    ({"$": "ndarray", "dtype": "<f4", "shape": [-1], "buf": 0}, "shape"),
    ({"$": "ndarray", "dtype": "<f4", "shape": [1.0], "buf": 0}, "shape"),
    ({"$": "ndarray", "dtype": "<f4", "shape": [2], "buf": 0}, "bytes"),  # 4 bytes sent
    ({"$": "float", "repr": "1e308 * 10"}, "float"),
    ({"$": "tuple", "items": {"a": 1}}, "list"),
    ({"$": "class", "name": "os.system"}, "class"),
    ({"$": "nothing"}, "kind"),
    (2**64, "64 bits"),
    (json.loads("[" * 40 + "]" * 40), "deep"),
    (list(range(wire.MAX_ITEMS + 1)), "items"),
])
def test_a_value_outside_the_protocol_is_refused(tree, why):
    assert why in refused(tree, [b"\0" * 4])


def test_no_refusal_quotes_what_the_runner_sent():
    assert "secret" not in refused({"$": "secret-kind"})
    assert "secret" not in refused({"$": "ndarray", "dtype": "secret", "shape": [], "buf": 0})
    assert "secret" not in refused({"$": "tensor", "dtype": "secret", "shape": [], "buf": 0})


def test_a_json_bomb_is_refused_from_its_length_alone():
    """A frame announcing a 64 MiB head (of empty lists: about 1.4 GB once parsed) is
    refused after its 8-byte length is read: nothing of it is read or parsed."""
    stream = io.BytesIO(struct.pack("<Q", 64 << 20) + b"[[]," * 1000)
    with pytest.raises(ProtocolError, match="over"):
        read_message(stream)
    assert stream.tell() == 8
    big = json.dumps([[]] * 100).encode()  # within the cap: read
    assert read_message(io.BytesIO(dumps([[]] * 100, [])))[0] == [[]] * 100 and len(big) > 100


def test_a_buffer_past_the_message_limit_is_refused_from_its_length():
    head = json.dumps([]).encode()
    stream = io.BytesIO(struct.pack("<Q", len(head)) + head + struct.pack("<I", 1)
                        + struct.pack("<Q", wire.MAX_MESSAGE + 1))
    with pytest.raises(ProtocolError):
        read_message(stream)


def test_a_read_gives_up_at_its_deadline():
    """A runner that sends half a message and falls silent: the read ends at its
    deadline (the judge's per-check budget), not never."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, dumps({"re": 1}, [])[:5])
        with open(read_end, "rb", buffering=0, closefd=False) as stream:
            start = time.monotonic()
            with pytest.raises(TimeoutError):
                read_message(stream, deadline=start + 0.5)
            assert time.monotonic() - start < 30  # (0.5 s; any bound shows it ended)
    finally:
        os.close(read_end)
        os.close(write_end)


class Channel:
    """Two peers over pipes: `judge` (untrusted other side) and `runner`, served in a
    thread, which exports `handed` (name: object) for the judge to call."""

    def __init__(self, handed):
        a_read, b_write = os.pipe()
        b_read, a_write = os.pipe()
        self.files = [open(a_read, "rb", buffering=0), open(a_write, "wb"),
                      open(b_read, "rb"), open(b_write, "wb")]
        self.judge = Peer(self.files[0], self.files[1], ("call",), untrusted=True)
        self.runner = Peer(self.files[2], self.files[3], ("call", "getattr", "reset"))
        self.runner.exports.update(enumerate(handed.values(), 1))
        self.remotes = {name: Remote(self.judge, i, {"kind": "callable"})
                        for i, name in enumerate(handed, 1)}
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        try:
            self.runner.serve_forever()
        except Exception:
            pass

    def close(self):
        for f in self.files:
            f.close()


@pytest.fixture
def channel():
    def write_nan(x, running):  # a kernel writing into its input x and its running stats
        x[...] = np.nan
        running[...] = 7.0
        return x.sum()

    def update(x, running):
        running[...] = x.mean()
        return None

    class Secret(Exception):
        pass

    def raises(kind):
        raise (ValueError if kind == "builtin" else Secret)("hidden case 3x6f:-0.486")

    made = Channel({"write_nan": write_nan, "update": update, "raises": raises})
    yield made
    made.close()


def test_a_call_writes_back_into_its_declared_updates_only(channel):
    x, running = np.ones(4, np.float32), np.zeros(4, np.float32)
    channel.remotes["update"].remote_call_updating((x, running), [running])
    assert (running == 1).all()  # declared: updated
    with pytest.raises(AssertionError, match="must not write into its inputs"):
        channel.remotes["write_nan"].remote_call_updating((x, running), [running])
    assert (x == 1).all()  # not declared: as it was (no NaN reached the judge's array)
    running[...] = 0
    with pytest.raises(AssertionError):  # nothing declared: nothing written back
        channel.remotes["update"](x, running)
    assert (running == 0).all()


@pytest.mark.parametrize("kind", ["builtin", "its own class"])
def test_the_judge_keeps_no_message_nor_class_name_of_the_runners_errors(channel, kind):
    with pytest.raises(RemoteError) as error:
        channel.remotes["raises"](kind)
    assert str(error.value) == UNQUOTED and "0.486" not in repr(error.value)
    if kind == "builtin":
        assert isinstance(error.value, ValueError)  # (except ValueError still catches it)
    else:
        assert type(error.value) is RemoteError and "Secret" not in repr(error.value)


def test_a_remote_objects_repr_names_no_type_of_the_runners():
    remote = Remote(None, 1, {"kind": "object", "type": "hidden case 3x6f"})
    assert repr(remote) == "<remote object>"
