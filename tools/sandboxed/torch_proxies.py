"""The torch side of the channel (tools.sandboxed.peer): a call across it as one autograd
node (Bridge), and the proxy of a torch.nn.Module on the other side (RemoteModule).
Imported on first use, so that the runner of a NumPy-only submission never imports torch.
"""

import importlib

import torch

from tools.sandboxed.remote import Remote, tensors_in


class Bridge(torch.autograd.Function):
    """A call to the other side as one node of this side's graph."""

    @staticmethod
    def forward(ctx, peer, frame, holder, *leaves):
        reply = peer.send_request(frame)
        ctx.peer, ctx.graph = peer, reply.get("graph")
        outputs = list(tensors_in(holder.setdefault("result", reply["value"])))
        holder["outputs"] = outputs
        ctx.mark_non_differentiable(*[t for t, d in zip(outputs, reply.get("diff", []))
                                      if not d])
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads):
        got = ctx.peer.request("backward", ctx.graph, list(grads))
        return (None, None, None, *got)


class RemoteModule(Remote, torch.nn.Module):
    """A proxy of a torch.nn.Module on the other side. isinstance sees torch.nn.Module
    (and a torch class such as torch.nn.Dropout as that class); every attribute is the
    remote module's, except the parameters, which are local copies with their .grad:
    changed in place (p.normal_()), they are sent back before the next request."""

    _LOCAL = {"named_parameters", "parameters", "forward", "remote_peak_memory",
              "remote_call_updating"}

    def __init__(self, peer, handle, info):
        Remote.__init__(self, peer, handle, info)
        object.__setattr__(self, "_mirror", [])

    def __getattribute__(self, name):
        if name.startswith("_") or name in RemoteModule._LOCAL:
            return object.__getattribute__(self, name)
        self._push()
        return self._peer.request("getattr", self, name)

    def __getattr__(self, name):  # (private names not found locally)
        raise AttributeError(name)

    def __setattr__(self, name, value):
        self._push()
        self._peer.request("setattr", self, name, value)

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete {name} of a graded module")

    @property
    def __class__(self):
        name = self._info.get("torch_class")
        if not name:
            return RemoteModule
        return importlib.import_module("tools.sandboxed.wire")._lookup(name)

    def __call__(self, *args, **kwargs):
        self._push()
        return self._peer.call(self, args, kwargs)

    forward = __call__

    def _push(self):
        changed = {name: p for name, p, before in self._mirror if not torch.equal(p, before)}
        if changed:
            object.__setattr__(self, "_mirror", [])
            self._peer.request("setparams", self, changed)

    def named_parameters(self, *args, **kwargs):
        self._push()
        mirror = []
        for name, value, grad in self._peer.request("params", self):
            p = torch.nn.Parameter(value.detach(), requires_grad=value.requires_grad)
            if grad is not None:
                p.grad = grad.detach()
            mirror.append((name, p, value.detach().clone()))
        object.__setattr__(self, "_mirror", mirror)
        return iter([(name, p) for name, p, _ in mirror])

    def parameters(self, *args, **kwargs):
        return iter([p for _, p in self.named_parameters()])

    def __repr__(self):
        return "<remote module>"
