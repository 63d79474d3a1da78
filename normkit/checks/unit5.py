"""Unit 5's checks: Exercises 5.1 (add_norm), 5.2 (TransformerEncoderLayer), 5.3
(TransformerEncoder), 5.4 (final_norm_gain) and 5.5 (linear2_grad_norms).

5.1 compares your add_norm with its two formulas; 5.2, 5.3 and 5.5 load the weights of
torch's TransformerEncoderLayer / TransformerEncoder into yours (torch's norms inside,
normkit.testing.torch_norms) and compare outputs and gradients within the error model's
tolerance (normkit.testing.encoder_tolerance); 5.4 compares your gains with the spectral
norm of the Jacobian torch computes. A wrong result is matched against what each classic
mistake gives (the *_mistakes functions: torch's modules wired as that mistake wires them,
computed exactly in float64), to name its likely cause. Your classes and functions are
imported when a check runs, so they are always your file as it is now.
"""

import copy

import numpy as np
import torch
import torch.nn.functional as F

from normkit.checks import exercise
from normkit.testing import (
    TOLERANCES,
    CheckFailed,
    assert_close,
    assert_same_computation,
    close,
    counted,
    encoder_tolerance,
    norm_tolerance,
    perturb_,
    torch_layer_norm_jacobian,
    torch_norms,
    torch_tensor_close,
)

# Exercise 5.1: add_norm ---------------------------------------------------------------------


def exact_copy(f):
    """f as it computes exactly: a float64 deep copy of a module, a function as it is."""
    return copy.deepcopy(f).double() if isinstance(f, torch.nn.Module) else f


def formula(x, sublayer, norm, norm_first):
    """Add & Norm as the course defines it: Pre-LN or Post-LN (N, S, E)."""
    return x + sublayer(norm(x)) if norm_first else norm(x + sublayer(x))


NO_RESIDUAL = ("the residual connection is missing: x itself must be added to the "
               "sublayer's output")


def add_norm_mistakes(x, sublayer, norm, norm_first):
    """{likely cause: what add_norm gives under that mistake} on x, computed exactly
    (float64) and rounded to x's dtype: the norm or the residual misplaced, or the other
    variant's formula."""
    f, n, t = exact_copy(sublayer), exact_copy(norm), x.double()  # t (N, S, E)
    with torch.no_grad():
        if norm_first:
            found = {
                "this is Post-LN, norm(x + sublayer(x)), where norm_first=True asks for "
                "Pre-LN": formula(t, f, n, False),
                "the residual carries norm(x), not x: Pre-LN normalizes only the sublayer's "
                "input, never the residual stream": n(t) + f(n(t)),
                "the sum was normalized too, norm(x + sublayer(norm(x))): Pre-LN normalizes "
                "only the sublayer's input": n(t + f(n(t))),
                NO_RESIDUAL: f(n(t))}
        else:
            found = {
                "this is Pre-LN, x + sublayer(norm(x)), where norm_first=False asks for "
                "Post-LN": formula(t, f, n, True),
                "the norm was applied to the sublayer's output, x + norm(sublayer(x)): "
                "Post-LN normalizes the sum, so that the residual stream is normalized too":
                    t + n(f(t)),
                NO_RESIDUAL: n(f(t))}
    return {cause: v.to(x.dtype).numpy() for cause, v in found.items()}


def check_add_norm(sublayer, norm, shape, norm_first, dtype=torch.float32, seed=0):
    """Your add_norm against its formula (value, shape, dtype), with sublayer and norm
    called once each; a wrong value is matched against add_norm_mistakes."""
    from normlib.transformer import add_norm

    x = torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = formula(x, sublayer, norm, norm_first)  # (N, S, E)
        calls = []
        given = {}  # {"sublayer" or "norm": the first input add_norm gave it}
        y = add_norm(x, counted(recorded(sublayer, given, "sublayer"), calls, "sublayer"),
                     counted(recorded(norm, given, "norm"), calls, "norm"), norm_first)
    kind = "Pre-LN" if norm_first else "Post-LN"
    case = f"{kind}, x {tuple(shape)} {dtype}"
    try:
        torch_tensor_close(y, expected, f"add_norm output, {case}",
                           mistakes=add_norm_mistakes(x, sublayer, norm, norm_first))
    except CheckFailed as error:
        if "Likely cause" in str(error):
            raise
        first = first_wrong_input(x, sublayer, norm, norm_first, given)
        raise CheckFailed(f"{error}\n  First to differ: {first}.") from None
    assert sorted(calls) == ["norm", "sublayer"], f"{case}: called {calls}; call each once"


def recorded(f, given, name):
    """f, keeping its first argument under name in the dict given."""
    def wrapper(t):
        given.setdefault(name, t.detach().clone() if isinstance(t, torch.Tensor) else t)
        return f(t)
    return wrapper


def first_wrong_input(x, sublayer, norm, norm_first, given):
    """Where a wrong add_norm goes wrong, in words: the first of the two calls (in the
    order the formula makes them) whose input differs from the formula's, or neither."""
    with torch.no_grad():
        first, second = ("norm", "sublayer") if norm_first else ("sublayer", "norm")
        inputs = {first: x}
        inputs[second] = norm(x) if norm_first else x + sublayer(x)
    for name in (first, second):
        got = given.get(name)
        if got is None:
            return f"{name} is never called"
        want = inputs[name].detach().numpy()
        if not (isinstance(got, torch.Tensor) and got.shape == inputs[name].shape and close(
                got.detach().numpy(), want, **TOLERANCES[want.dtype])):
            return f"the input your add_norm gives {name}"
    return ("both inputs are right (what add_norm gives sublayer and norm): look at what it "
            "does with their outputs")


@exercise("5.1", "transformer.add_norm")
def visible_5_1():
    torch.manual_seed(0)
    linear = torch.nn.Linear(8, 8)
    norm = torch.nn.LayerNorm(8)
    with torch.no_grad():  # random affine: a norm misplaced or skipped shows
        norm.weight.normal_(1.0, 0.5)
        norm.bias.normal_(0.0, 0.5)
    check_add_norm(linear, norm, (2, 5, 8), norm_first=False)
    check_add_norm(linear, norm, (2, 5, 8), norm_first=True)
    # float64: its precision, to the last digits
    check_add_norm(linear.double(), norm.double(), (2, 3, 8), True, torch.float64, seed=1)


# Exercise 5.2: TransformerEncoderLayer ------------------------------------------------------


def given(dtype):
    """The dtype a case passes to your module: None (its default: torch's, float32) for
    float32, so that the default counts in some case."""
    return None if dtype == torch.float32 else dtype



def over_sequence(norm):
    """torch's LayerNorm `norm` as if it normalized each sample over (S, E) together, its
    parameters (E,) applied after: a norm over the wrong axes."""
    def normalize(x):  # (N, S, E)
        y = F.layer_norm(x, x.shape[-2:], eps=norm.eps) * norm.weight  # (N, S, E)
        return y if norm.bias is None else y + norm.bias
    return normalize


def layer_output(t, x, norm_first, norms=None, activation=None, residual_inside=False):
    """torch's layer t (dropout off) on x (N, S, E), its forward written out, with norms
    (norm1, norm2) and activation in place of its own, and each sublayer adding its input
    itself too if residual_inside: (N, S, E)."""
    norm1, norm2 = norms or (t.norm1, t.norm2)
    activation = activation or t.activation

    def attention(h):  # (N, S, E)
        return t.self_attn(h, h, h, need_weights=False)[0] + (h if residual_inside else 0)

    def feed_forward(h):  # (N, S, E)
        return t.linear2(activation(t.linear1(h))) + (h if residual_inside else 0)

    x = formula(x, attention, norm1, norm_first)  # (N, S, E)
    return formula(x, feed_forward, norm2, norm_first)


def layer_mistakes(theirs, x, norm_first, activation):
    """{"output": {likely cause: what the layer gives under that mistake}}, torch's layer
    theirs computed exactly (float64) with that mistake, for assert_same_computation."""
    t, h = copy.deepcopy(theirs).double(), x.double()  # h (N, S, E)
    wanted, other = ("Pre-LN", "Post-LN") if norm_first else ("Post-LN", "Pre-LN")
    found = {
        f"the layer computes {other} where norm_first={norm_first} asks for {wanted}: "
        "self.norm_first must reach add_norm": layer_output(t, h, not norm_first),
        "the feed-forward has no activation: linear2(linear1(x)) is one linear map":
            layer_output(t, h, norm_first, activation=lambda a: a),
        "norm1 serves both sublayers: the feed-forward's Add & Norm has its own, norm2":
            layer_output(t, h, norm_first, norms=(t.norm1, t.norm1)),
        "norm1 and norm2 are swapped: norm1 goes with self-attention, norm2 with the "
        "feed-forward": layer_output(t, h, norm_first, norms=(t.norm2, t.norm1)),
        "the residual is added twice: add_norm adds it, so the sublayer must return its "
        "own output alone": layer_output(t, h, norm_first, residual_inside=True)}
    if isinstance(t.norm1, torch.nn.LayerNorm):
        found["the norms normalize each sample over (S, E) together: a transformer's "
              "LayerNorm normalizes each token over E alone"] = layer_output(
                  t, h, norm_first, norms=(over_sequence(t.norm1), over_sequence(t.norm2)))
    if activation != "relu":
        found[f"the activation is ReLU where activation={activation!r}: use "
              "self.activation"] = layer_output(t, h, norm_first, activation=F.relu)
    return {"output": found}


def assert_dropout_off(ours, x, case):
    """In evaluation mode, two calls of ours on x give the same output."""
    with torch.no_grad():
        first, second = ours(x), ours(x)
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor) \
            and first.shape == second.shape and not torch.equal(first, second):
        raise CheckFailed(
            f"output {case}: two calls on the same input differ.\n  Likely cause: dropout is "
            "still on in evaluation mode: the layer's Dropout modules turn off in eval(); "
            "F.dropout does only with training=self.training.")


def check_layer(norm_first, shape=(2, 5, 8), nhead=2, dim_feedforward=16, activation="relu",
                norm="layer", dtype=torch.float32, dropout=0.0, seed=0, training=False):
    """Your layer (torch's norms inside) against torch.nn.TransformerEncoderLayer with the
    same weights, random norm parameters and biases included, computed exactly (float64):
    output and every gradient under a random upstream gradient, within the error model's
    tolerance for one layer (normkit.testing.encoder_tolerance); a wrong output is matched
    against layer_mistakes. Both in training mode, or both in evaluation mode with dropout
    > 0, where two calls must agree (with an input that requires grad, torch skips its
    fused path); training with dropout: 1.0 alone, which zeroes every dropout's output
    whatever the random draws (at grading your layer draws them in another process)."""
    from normlib.transformer import TransformerEncoderLayer

    n, s, e = shape
    torch.manual_seed(seed)
    theirs = torch.nn.TransformerEncoderLayer(e, nhead, dim_feedforward, dropout, activation,
                                              batch_first=True, norm_first=norm_first,
                                              dtype=dtype)
    if norm == "rms":
        theirs.norm1 = torch.nn.RMSNorm(e, eps=1e-5, dtype=dtype)
        theirs.norm2 = torch.nn.RMSNorm(e, eps=1e-5, dtype=dtype)
    perturb_(theirs, seed + 1)
    with torch_norms():
        ours = TransformerEncoderLayer(e, nhead, dim_feedforward, dropout, activation,
                                       norm_first=norm_first, norm=norm,
                                       dtype=given(dtype))
    kind = "Pre-LN" if norm_first else "Post-LN"
    mode = f", dropout {dropout} in {'training' if training else 'eval'} mode" if dropout \
        else ""
    case = f"for {kind}, x {shape} {dtype}, {activation}, norm={norm!r}{mode}"
    assert_same_keys(ours, theirs, case)
    ours.load_state_dict(theirs.state_dict())
    x = 2 * torch.randn(shape, dtype=dtype) + 1  # (N, S, E)
    assert not training or dropout in (0.0, 1.0), "random draws are not compared"
    if dropout and not training:
        ours.eval()
        theirs.eval()
        assert_dropout_off(ours, x, case)
    assert_same_computation(ours, theirs, x, case, seed,
                            encoder_tolerance(x, 1, dim_feedforward),
                            lambda _: layer_mistakes(theirs, x, norm_first, activation))


@exercise("5.2", "transformer.TransformerEncoderLayer")
def visible_5_2():
    check_layer(norm_first=False)
    check_layer(norm_first=True, activation="gelu", seed=1)
    check_layer(norm_first=False, shape=(2, 4, 8), dropout=0.3, seed=7)
    check_layer(norm_first=False, dropout=1.0, training=True, seed=8)  # dropout's place
    # another width and head count, torch's feed-forward width, RMSNorm, float64
    check_layer(norm_first=True, shape=(2, 3, 12), nhead=3, dim_feedforward=2048, norm="rms",
                dtype=torch.float64, seed=9)


# Exercise 5.3: TransformerEncoder -----------------------------------------------------------


def settings(module):
    """{"layers.0.norm1.eps": value}: what each submodule of module was built with (eps, a
    dropout's p, an activation by its name, whether it has a bias), by the names of its
    submodules. (At grading, an activation that the runner holds has no name here: left
    out; the output's comparison still sees it.)"""
    found = {}
    for name, m in module.named_modules():
        for attr in ("eps", "p", "activation", "bias"):
            value = getattr(m, attr, "absent")
            if attr == "bias" and not isinstance(value, str):
                value = value is not None  # (a bias parameter, or None)
            if attr == "activation" and not hasattr(value, "__name__"):
                continue
            if not isinstance(value, (str, torch.nn.Module, torch.Tensor)):
                found[f"{name}.{attr}"] = getattr(value, "__name__", value)
    return found


def assert_same_settings(ours, theirs, case):
    """Every submodule of ours that theirs has too was built with the same eps, dropout
    probability, activation and bias."""
    mine, wanted = settings(ours), settings(theirs)
    for key, value in wanted.items():
        if key in mine and mine[key] != value:
            raise CheckFailed(
                f"settings {case}: {key} is {mine[key]!r}, torch's {value!r}.\n  Likely "
                "cause: an option given to the stack did not reach every layer and the final "
                "norm: pass each on (activation, dropout, layer_norm_eps, bias, ...).")


def assert_same_keys(ours, theirs, case):
    """ours has the state_dict keys of theirs, each of the same shape (so that theirs loads
    into ours); a final norm missing or extra is named."""
    state, expected = ours.state_dict(), theirs.state_dict()
    keys, expected_keys = set(state), set(expected)
    missing, unexpected = sorted(expected_keys - keys), sorted(keys - expected_keys)
    if not missing and not unexpected:
        for key, tensor in expected.items():
            if tuple(state[key].shape) != tuple(tensor.shape):
                raise CheckFailed(
                    f"{key} {case}: another shape than torch's {tuple(tensor.shape)}.\n  "
                    f"Where: {key.rpartition('.')[0] or key}, built with another size: "
                    "the constructor's arguments (d_model, nhead, dim_feedforward) must reach "
                    "every submodule")
        return
    final = {key for key in missing + unexpected if key.startswith("norm.")}
    cause = ""
    if final and final == set(missing):
        cause = ("a Pre-LN stack ends with a final norm, self.norm: its residual stream is "
                 "never normalized otherwise")
    elif final and final == set(unexpected):
        cause = ("a Post-LN stack has no final norm (self.norm = None): its last layer "
                 "already ends with one")
    raise CheckFailed(f"state_dict keys {case}: missing {missing[:4]}, unexpected "
                      f"{unexpected[:4]}" + (f".\n  Likely cause: {cause}." if cause else
                                             ".\n  Where: the submodules and parameters "
                                             "those keys name: each keeps torch's name, "
                                             "so that state_dicts load both ways."))


def same_layer(ours, j):
    """"layers.i": the first earlier layer of ours whose state (ours.state_dict(), which
    keeps a tensor used twice under each name) equals that of layers.j, or "an earlier
    layer"."""
    state = ours.state_dict()

    def of(i):  # {name within the layer: tensor}
        return {k.split(".", 2)[2]: v for k, v in state.items() if k.startswith(f"layers.{i}.")}

    mine = of(j)
    for i in range(j):
        theirs = of(i)
        if theirs.keys() == mine.keys() and all(torch.equal(v, mine[k])
                                                 for k, v in theirs.items()):
            return f"layers.{i}"
    return "an earlier layer"


def assert_nothing_shared(ours, theirs, case):
    """ours has every parameter of theirs under its own name: named_parameters() lists a
    tensor used twice once only, so a name missing names a layer or module used twice
    (names work at grading too, where ours lives in another process)."""
    mine = {name for name, _ in ours.named_parameters()}
    missing = sorted(set(dict(theirs.named_parameters())) - mine)
    if not missing:
        return
    layer = missing[0].split(".")[:2]  # ["layers", "j"]
    prefix = ".".join(layer) + "."
    if layer[0] == "layers" and not any(name.startswith(prefix) for name in mine):
        raise CheckFailed(
            f"parameters shared between layers {case}: {'.'.join(layer)} is "
            f"{same_layer(ours, int(layer[1]))}.\n  Likely cause: one layer module stands "
            "several times in self.layers (a list repeated with *?): build a new layer for "
            "each, so that each has its own weights.")
    module = missing[0].rsplit(".", 1)[0]
    raise CheckFailed(
        f"parameters shared between layers {case}: {module} is shared (its parameters are "
        f"another module's).\n  Likely cause: one module is used by several layers: every "
        "layer needs its own norms and sublayers, built anew.")


def stack_mistakes(theirs, x):
    """{"output": {likely cause: what the stack gives under that mistake}}, torch's stack
    theirs computed exactly (float64) with that mistake, for assert_same_computation."""
    t, h = copy.deepcopy(theirs).double(), x.double()  # h (N, S, E)
    final = t.norm or (lambda a: a)
    layers = h
    for layer in t.layers:
        layers = layer(layers)  # (N, S, E)
    found = {"each layer was given src, not the previous layer's output: the layers run "
             "one after the other": final(t.layers[-1](h))}
    if t.norm is not None:
        found["the final norm was built but not applied: forward ends with self.norm in "
              "Pre-LN"] = layers
    return {"output": found}


def check_encoder(num_layers, norm_first, shape=(2, 5, 8), nhead=2, dim_feedforward=16,
                  norm="layer", dtype=torch.float32, seed=0, scale=2.0, training=False,
                  **options):
    """Your stack (torch's norms inside) against torch.nn.TransformerEncoder with the same
    weights, every parameter of every layer different: settings (assert_same_settings),
    state_dict keys, independent layers, output and every gradient under a random upstream
    gradient, computed exactly (float64), within the error model's tolerance for num_layers
    layers (normkit.testing.encoder_tolerance); a wrong output is matched against
    stack_mistakes. options: the layers' activation, dropout (then both in evaluation
    mode, or with training and a dropout of 1.0 in training mode: check_layer), layer_norm_eps,
    bias; scale: the input's."""
    from normlib.transformer import TransformerEncoder

    n, s, e = shape
    eps, bias = options.get("layer_norm_eps", 1e-5), options.get("bias", True)
    layer_options = {k: v for k, v in options.items() if k != "dropout"}
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(e, nhead, dim_feedforward,
                                             options.get("dropout", 0.0), batch_first=True,
                                             norm_first=norm_first, dtype=dtype,
                                             **layer_options)
    if norm == "rms":
        layer.norm1 = torch.nn.RMSNorm(e, eps=eps, dtype=dtype)
        layer.norm2 = torch.nn.RMSNorm(e, eps=eps, dtype=dtype)
    final = None
    if norm_first:
        final = (torch.nn.RMSNorm(e, eps=eps, dtype=dtype) if norm == "rms"
                 else torch.nn.LayerNorm(e, eps=eps, bias=bias, dtype=dtype))
    theirs = torch.nn.TransformerEncoder(layer, num_layers, final, enable_nested_tensor=False)
    perturb_(theirs, seed + 1, weight_scale=0.3)  # torch's layers start as copies of one
    with torch_norms():
        ours = TransformerEncoder(num_layers, e, nhead, dim_feedforward, norm_first=norm_first,
                                  norm=norm, dtype=given(dtype), **options)
    kind = "Pre-LN" if norm_first else "Post-LN"
    case = f"for {kind}, {num_layers} layers, x {shape} {dtype}, norm={norm!r}, {options}"
    assert_same_settings(ours, theirs, case)
    assert_same_keys(ours, theirs, case)
    assert_nothing_shared(ours, theirs, case)
    ours.load_state_dict(theirs.state_dict())
    assert not training or options.get("dropout", 0.0) in (0.0, 1.0), "random draws"
    if options.get("dropout") and not training:
        ours.eval()
        theirs.eval()
    x = scale * torch.randn(shape, dtype=dtype) + 1  # (N, S, E)
    assert_same_computation(ours, theirs, x, case, seed,
                            encoder_tolerance(x, num_layers, dim_feedforward, eps),
                            lambda _: stack_mistakes(theirs, x))


@exercise("5.3", "transformer.TransformerEncoder")
def visible_5_3():
    check_encoder(num_layers=3, norm_first=False)
    check_encoder(num_layers=3, norm_first=True)
    # options off their defaults, to be passed to each layer and to the final norm: the
    # input's variance (0.2 ** 2 = 0.04) is below layer_norm_eps = 0.05, so eps counts
    check_encoder(3, True, (3, 4, 8), seed=6, scale=0.2, activation="gelu",
                  layer_norm_eps=0.05, bias=False, dropout=0.1)
    check_encoder(2, False, seed=7, dropout=1.0, training=True)  # dropout's place
    # another depth, width and head count, torch's feed-forward width, RMSNorm, float64
    check_encoder(2, True, (2, 3, 12), nhead=3, dim_feedforward=2048, norm="rms",
                  dtype=torch.float64, seed=8)


# Exercise 5.4: final_norm_gain --------------------------------------------------------------


def torch_gains(stream, eps):
    """The spectral norm of torch's Jacobian of layer_norm (no weight or bias) at each token
    of stream (*B, E), computed in float64 and rounded to stream's dtype: (*B,)."""
    J = torch_layer_norm_jacobian(stream, eps)  # (*B, E, E)
    return torch.linalg.matrix_norm(J, ord=2).to(stream.dtype)  # (*B,)


def gain_mistakes(stream, eps):
    """{likely cause: the gains that mistake gives} for stream (*B, E), computed exactly
    (float64) and rounded to its dtype."""
    t, e = stream.double(), stream.shape[-1]  # t (*B, E)
    var = t.var(dim=-1, unbiased=False)  # (*B,)
    centred = t - t.mean(dim=-1, keepdim=True)  # (*B, E)
    found = {
        "the gain scales like the inverse length of the centred token, not like the "
        "inverse of its spread":
            torch.rsqrt(centred.pow(2).sum(dim=-1) + eps),
        "the gain scales like 1 / RMS(x): the token's mean was not subtracted, and "
        "LayerNorm centres each token first": torch.rsqrt(t.pow(2).mean(dim=-1) + eps),
        f"the unbiased variance: dividing by E - 1 = {e - 1} (torch's default "
        f"unbiased=True) where LayerNorm divides by E = {e}":
            torch.rsqrt(t.var(dim=-1, unbiased=True) + eps),
        "the gain scales like 1 / variance, not like 1 / std":
            1 / (var + eps),
        "eps is left out: it counts wherever a token's variance is not far above eps":
            torch.rsqrt(var),
        "eps is added to the std, not where torch's LayerNorm adds it (Unit 1, section 1)":
            1 / (var.sqrt() + eps)}
    return {cause: v.to(stream.dtype).numpy() for cause, v in found.items()}


def check_gain(stream, eps=1e-5):
    """Your gains against torch's, in value, shape and dtype; tolerance: two stages of the
    error model (normkit.testing); a wrong value is matched against gain_mistakes, a wrong
    shape names the axes it was reduced over."""
    from normlib.transformer import final_norm_gain

    case = f"for a stream {tuple(stream.shape)} {stream.dtype}, eps={eps}"
    tol = norm_tolerance(stream, (-1,), eps, depth=2)
    reduced = (tuple(stream.shape), (stream.dim() - 1,), "one gain per token (over E)", False)
    torch_tensor_close(final_norm_gain(stream, eps), torch_gains(stream, eps), f"gain {case}",
                       **tol, mistakes=gain_mistakes(stream, eps), reduced=reduced)


@exercise("5.4", "transformer.final_norm_gain")
def visible_5_4():
    torch.manual_seed(0)
    check_gain(3.8 * torch.randn(2, 5, 16))  # (N, S, E): a stream grown to RMS 3.8
    check_gain(0.003 * torch.randn(4, 8))  # a variance near eps: where eps goes shows
    check_gain(torch.randn(4, 8, dtype=torch.float64) + 2)  # tokens with a nonzero mean
    check_gain(0.5 * torch.randn(3, 8), eps=0.5)  # an eps of its own


# Exercise 5.5: linear2_grad_norms -----------------------------------------------------------


def profile_mistakes(theirs, x, expected, call):
    """{likely cause: the profile that mistake gives} from torch's stack theirs (float64),
    after its backward; call: "first" or "second" (where earlier gradients are held)."""
    layers = list(theirs.layers)
    found = {
        f"the loss was summed, not averaged: F.mse_loss's mean divides by all N * S * E = "
        f"{x.numel()} values": expected * x.numel(),
        "these are the gradients of linear1.weight: the profile is of each layer's linear2":
            np.array([layer.linear1.weight.grad.norm().item() for layer in layers]),
        "these are the norms of the weights, not of their gradients (.grad)":
            np.array([layer.linear2.weight.norm().item() for layer in layers]),
        "the layers are in reverse order: layer 1 comes first": expected[::-1].copy()}
    if call == "second":
        found["the first call's gradients are still in .grad: backward adds to them, so "
              "they must be cleared first (zero_grad)"] = 2 * expected
    return found


def assert_profile_shape(profile, expected, name):
    """profile is a NumPy array of one value per layer."""
    if isinstance(profile, (list, tuple)):
        raise CheckFailed(f"{name}: expected a numpy.ndarray, got {type(profile).__name__}.\n"
                          f"  Likely cause: the norms were collected in a "
                          f"{type(profile).__name__}: return them as a NumPy array.")
    if isinstance(profile, np.ndarray) and profile.ndim == 1 and profile.shape != expected.shape:
        raise CheckFailed(f"{name}: expected shape {expected.shape}, got {profile.shape}.\n"
                          f"  Likely cause: the profile has one value per layer of "
                          f"encoder.layers ({len(expected)}), layer 1 first.")


def check_profile(num_layers, norm_first, shape=(2, 5, 8), nhead=2, dim_feedforward=16,
                  seed=0):
    """Your profile of your stack (torch's norms inside, float64), called twice, against the
    gradient norms of torch.nn.TransformerEncoder with the same weights, in value, shape and
    dtype, within the error model's tolerance for num_layers layers; a wrong profile is
    matched against profile_mistakes."""
    from normlib.transformer import TransformerEncoder, linear2_grad_norms

    n, s, e = shape
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(e, nhead, dim_feedforward, 0.0, batch_first=True,
                                             norm_first=norm_first, dtype=torch.float64)
    final = torch.nn.LayerNorm(e, dtype=torch.float64) if norm_first else None
    theirs = torch.nn.TransformerEncoder(layer, num_layers, final, enable_nested_tensor=False)
    perturb_(theirs, seed + 1, weight_scale=0.3)  # every layer different
    with torch_norms():
        ours = TransformerEncoder(num_layers, e, nhead, dim_feedforward, norm_first=norm_first,
                                  dtype=torch.float64)
    ours.load_state_dict(theirs.state_dict())
    x, target = torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64)
    F.mse_loss(theirs(x), target).backward()
    expected = np.array([layer.linear2.weight.grad.norm().item() for layer in theirs.layers])
    case = f"for {'Pre' if norm_first else 'Post'}-LN, {num_layers} layers, x {shape}"
    tol = encoder_tolerance(x, num_layers, dim_feedforward)
    for call in ("first", "second"):
        profile = linear2_grad_norms(ours, x, target)
        assert_profile_shape(profile, expected, f"{call} call {case}")
        assert_close(profile, expected, f"{call} call {case}", **tol,
                     mistakes=profile_mistakes(theirs, x, expected, call))


@exercise("5.5", "transformer.linear2_grad_norms")
def visible_5_5():
    check_profile(3, norm_first=False)
    check_profile(3, norm_first=True)
