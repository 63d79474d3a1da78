"""What crosses the channel (tools.sandboxed.peer) as a handle is seen on the other side as a
proxy: `Remote`, whose attributes and calls are requests to its peer. Here, apart from the
channel, so that torch_proxies.py (the torch module's proxy, imported on first use) and
peer.py each import it, and neither imports the other at import time."""

from tools.sandboxed.wire import is_tensor


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
        """(self(*args), the bytes its process's memory grew by at its peak), measured from
        outside that process (the judge's `Peer.measurer`; see normkit.testing.peak_memory)."""
        if self._peer.measurer is None:
            raise RuntimeError("memory is measured by the judge only")
        return self._peer.measurer(self, args)

    def remote_source(self):
        """(the text of the student's file that defines this function, its name there), read
        by the judge from the submission (`Peer.sourcer`; see normkit.kernel_code)."""
        if self._peer.sourcer is None:
            raise RuntimeError("a submission's source is read by the judge only")
        return self._peer.sourcer(self)

    def remote_call_updating(self, args, updates):
        """self(*args), where the arrays `updates` (some of args) receive what the call wrote
        into them (see normkit.testing.call_updating)."""
        return self._peer.call(self, args, {}, updates)

    def __repr__(self):  # (not the other side's type name: a string it chose)
        return f"<remote {self._info.get('kind', 'object')}>"
