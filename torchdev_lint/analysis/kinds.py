"""What a value is: a tensor, an nn.Module, a data loader, a batch, or unknown.

Every rule that needs to know "is this a tensor?" asks here. The inference is local and
conservative: a value is a tensor only when something says so (a torch factory or op,
a move of a tensor, a batch element from a loader, a tensor parameter of ``forward``),
and a module only when built from an ``nn.Module`` class, a model zoo, ``from_pretrained``
or a method that returns the module itself. Everything else is UNKNOWN, and rules stay
silent on UNKNOWN: we prefer silence to noise.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

import libcst as cst

from torchdev_lint.analysis import tree
from torchdev_lint.analysis.imports import dotted_name


# Classes whose ``from_pretrained`` builds no module: what they return is no tensor either.
PREPROCESSOR_SUFFIXES = ("Tokenizer", "TokenizerFast", "Processor", "FeatureExtractor", "Config")


class Kind(enum.Enum):
    TENSOR = "tensor"
    MODULE = "module"
    LOADER = "loader"  # iterating yields batches
    BATCH = "batch"  # unpacking or indexing yields tensors
    OPTIMIZER = "optimizer"
    OPTIMIZER_CLASS = "optimizer class"  # `torch.optim.AdamW`, `getattr(torch.optim, name)`
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Value:
    kind: Kind
    # May live on an accelerator: the result of a move to a device, a model output, or
    # something computed from those (TDL009 needs this).
    maybe_accelerator: bool = False
    # Known to be on the CPU: built there (a factory without `device=`, `from_numpy`) or
    # moved there (`.cpu()`), or computed from such tensors only. A tensor that is neither
    # (a parameter of `forward`) may be anywhere.
    on_cpu: bool = False
    # Placed by a move in sight: the result of `.to(device)`/`.cuda()` (not to the CPU), of a
    # factory given a device, of a model or op fed such a value, or computed from one. Where
    # the program puts its tensors on an accelerator this one is there: a `.numpy()` of it
    # fails (TDL009's failure path), where `maybe_accelerator` alone says "perhaps".
    placed: bool = False


UNKNOWN = Value(Kind.UNKNOWN)
TENSOR = Value(Kind.TENSOR)
MODULE = Value(Kind.MODULE)
OPTIMIZER_CLASS = Value(Kind.OPTIMIZER_CLASS)
MOVED_UNKNOWN = Value(Kind.UNKNOWN, maybe_accelerator=True, placed=True)  # `thing.to(device)`
CPU_TENSOR = Value(Kind.TENSOR, on_cpu=True)
# A module's registered buffer or parameter: it moves with the module, onto the accelerator
# where the program puts the module there.
MODULE_STATE = Value(Kind.TENSOR, maybe_accelerator=True)

# torch functions that return a tensor. Factories first (torch.utils._device lists the ones
# set_default_device intercepts), then common ops.
TENSOR_FACTORIES = frozenset(
    """zeros ones empty full arange range linspace logspace eye rand randn randint randperm
    tensor as_tensor asarray scalar_tensor empty_strided zeros_like ones_like empty_like
    full_like rand_like randn_like randint_like from_numpy frombuffer normal bernoulli
    multinomial tril_indices triu_indices bartlett_window blackman_window hamming_window
    hann_window kaiser_window""".split()
)
# Factories that build a new tensor on the default device (the CPU) unless given `device=`.
# Not the `*_like` ones (they follow their input), nor `from_numpy`/`frombuffer` (no
# `device=`), nor `normal`/`bernoulli`/`multinomial` (they follow tensor arguments).
NEW_TENSOR_FACTORIES = frozenset(
    """zeros ones empty full arange range linspace logspace eye rand randn randint randperm
    tensor as_tensor asarray empty_strided tril_indices triu_indices bartlett_window
    blackman_window hamming_window hann_window kaiser_window""".split()
)
# Factories whose values come from a random generator (CPU and CUDA ones differ).
RANDOM_FACTORIES = frozenset("rand randn randint randperm".split())
# Methods that only log or show what they are given (`logger.info(...)`, `writer.add_scalar(...)`).
LOG_METHODS = frozenset({"log", "log_dict", "info", "debug", "warning", "add_scalar", "write"})
# wrappers that spread a model over GPUs: code that builds one is written for GPUs
GPU_WRAPPERS = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                          "torch.nn.parallel.DistributedDataParallel",
                          "torch.nn.parallel.data_parallel.DataParallel"})
TENSOR_OPS = frozenset(
    """cat concat concatenate stack hstack vstack dstack where matmul mm bmm einsum softmax
    log_softmax sigmoid tanh relu exp log sqrt abs clamp clip sum mean std var prod cumsum
    argmax argmin gather scatter index_select masked_select flatten reshape squeeze
    unsqueeze transpose permute flip roll repeat_interleave tile outer cross dot norm
    cdist bucketize searchsorted tril triu diag clone detach polar complex real imag
    lerp maximum minimum floor ceil round sign sin cos atan2 pow square rsqrt erf
    logsumexp cumprod diff nan_to_num isnan isinf isfinite logical_and logical_or
    logical_not eq ne lt le gt ge addmm baddbmm narrow view_as_real
    view_as_complex fft max min sort topk median unique argsort""".split()
)
TENSOR_CLASSES = frozenset(
    "Tensor FloatTensor DoubleTensor HalfTensor LongTensor IntTensor ShortTensor "
    "ByteTensor BoolTensor BFloat16Tensor".split()
)
# Tensor methods whose result is not a tensor.
NON_TENSOR_METHODS = frozenset(
    """item tolist numpy size dim ndimension numel element_size data_ptr is_contiguous
    is_floating_point is_complex get_device nelement storage untyped_storage
    register_hook backward stride __len__ chunk split unbind""".split()
)
TENSOR_ATTRIBUTES = frozenset("T mT H mH data grad real imag".split())
# Attributes of a tensor (or of a model's output object) that are not tensors themselves.
NON_TENSOR_ATTRIBUTES = frozenset(
    """shape device dtype ndim is_cuda is_cpu is_meta is_leaf requires_grad layout names
    grad_fn is_sparse is_quantized itemsize nbytes""".split()
)
# The names torch gives its dtypes: `.to(torch.float16)` changes the dtype, not the device.
DTYPE_NAMES = frozenset(
    """float16 float32 float64 half float double bfloat16 int8 int16 int32 int64 int long
    short uint8 bool complex64 complex128 cfloat cdouble float8_e4m3fn float8_e5m2 dtype""".split()
)
# nn.Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset(
    """to cuda cpu xpu mps train eval half float double bfloat16 requires_grad_ type
    apply share_memory to_empty zero_grad""".split()
)
# Base classes, beyond torch.nn.*, whose subclasses are nn.Modules.
MODULE_BASE_NAMES = frozenset(
    "Module LightningModule PreTrainedModel ModelMixin DiffusionPipeline".split()
)
# Frameworks with a `Module` class of their own, whose modules track lists and attributes
# differently (MLX and Flax register modules kept in lists): not nn.Modules.
NON_TORCH_PACKAGES = ("mlx.", "flax.", "haiku.", "equinox.", "jax.", "tensorflow.", "keras.",
                      "tinygrad.", "paddle.", "mindspore.")
MODEL_ZOO_PREFIXES = ("torchvision.models.", "timm.create_model", "timm.models.")
# A name that says it holds a device: `device`, `DEVICE`, `train_device`, `self.dev`... but
# not `device_type` (what autocast takes) or `device_ids`/`device_count`.
_DEVICE_WORD = re.compile(r"(?i)(?:^|_)(?:device|dev)(?:$|_)")
_NOT_A_DEVICE = re.compile(r"(?i)(?:^|_)(?:type|types|ids?|count|name|str)$")


def names_a_device(name: str) -> bool:
    """``name`` (a variable, attribute or parameter) says it holds a device."""
    return _DEVICE_WORD.search(name) is not None and _NOT_A_DEVICE.search(name) is None
OPTIMIZER_PACKAGES = ("torch.optim.", "apex.optimizers.", "bitsandbytes.optim.",
                      "torch_optimizer.", "timm.optim.", "transformers.", "deepspeed.ops.",
                      "lion_pytorch.", "pytorch_lamb.", "adabelief_pytorch.")
OPTIMIZER_NAME = re.compile(
    r"(Optimizer|Adam\w*|AdamW|SGD\w*|RMSprop|Adagrad|Adadelta|Adamax|LBFGS|Lamb|LAMB|Lion"
    r"|Adafactor|Ranger\w*|NAdam|RAdam|ASGD|Rprop|Shampoo|Sophia\w*|Lars|LARS)$"
)
# Modules whose attributes are optimizer classes (`getattr(torch.optim, name)`).
OPTIMIZER_MODULES = frozenset({"torch.optim", "apex.optimizers", "bitsandbytes.optim",
                               "torch_optimizer", "timm.optim"})
_OPTIMIZER_CLASS_NAME = re.compile(r"(?i)^_*(optimizer|optim|opt)_?(cls|class|klass|constructor|factory)$")
LOADER_NAME = re.compile(r"(?i)loader")
# Functions that restore tensors from a file, taking `map_location` second.
TORCH_LOADERS = frozenset({"torch.load", "torch.jit.load", "torch.serialization.load"})
TORCH_SAVERS = frozenset({"torch.save", "torch.jit.save", "torch.serialization.save"})
# Functions that turn a tensor argument into a NumPy array by calling its `numpy()`
# (through `__array__`): which positional arguments they convert (None: all of them).
NUMPY_CONVERTERS = {
    **{f"numpy.{name}": (0,) for name in """array asarray asanyarray ascontiguousarray isnan
       isinf isfinite sum mean std var max min argmax argmin abs sqrt exp log round clip
       unique sort argsort nonzero transpose squeeze""".split()},
    "numpy.save": (1,), "numpy.savetxt": (1,),
    **{f"matplotlib.pyplot.{name}": None for name in "plot scatter imshow hist bar".split()},
    "PIL.Image.fromarray": (0,),
}

MOVE_METHODS = frozenset({"to", "cuda", "xpu", "mps"})


_ANNOTATION_WRAPPERS = frozenset({"Optional", "Union", "Annotated", "Final", "ClassVar"})
_VARIABLE_CLASSES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def is_variable_class(qualified: str) -> bool:
    """``torch.autograd.Variable``: a legacy wrapper whose instances are tensors."""
    return qualified in _VARIABLE_CLASSES


def annotation_says_tensor(annotation: cst.BaseExpression, qualify) -> bool:
    """``Tensor``, ``torch.FloatTensor``, ``nn.Parameter``, ``"torch.Tensor"``,
    ``Optional[Tensor]``, ``Tensor | None``, ``Union[Tensor, ...]``: a tensor (or nothing).
    A name imported from elsewhere than torch (``tf.Tensor``) is not one."""
    if isinstance(annotation, cst.SimpleString):
        text = annotation.evaluated_value
        if not isinstance(text, str):
            return False
        try:
            annotation = cst.parse_expression(text)
        except (cst.ParserSyntaxError, RecursionError, ValueError):
            return False
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return annotation_says_tensor(annotation.left, qualify) or annotation_says_tensor(
            annotation.right, qualify
        )
    if isinstance(annotation, cst.Subscript):
        wrapper = (qualify(annotation.value) or _last_name(annotation.value) or "").rsplit(".", 1)[-1]
        if wrapper not in _ANNOTATION_WRAPPERS:
            return False
        elements = [e.slice.value for e in annotation.slice if isinstance(e.slice, cst.Index)]
        if wrapper in ("Annotated", "Final", "ClassVar"):
            elements = elements[:1]
        return any(annotation_says_tensor(e, qualify) for e in elements)
    last = _last_name(annotation)
    if last not in TENSOR_CLASSES and last != "Parameter":
        return False
    qualified = qualify(annotation) if isinstance(annotation, (cst.Name, cst.Attribute)) else None
    if qualified is None:
        # Unresolved: `Tensor` or `torch.Tensor` in a file that imports torch oddly.
        return last != "Parameter" or isinstance(annotation, cst.Attribute)
    return qualified.startswith("torch.")


def _last_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def is_tensor_function(qualified: str) -> bool:
    if qualified.startswith("torch.nn.functional."):
        return True
    if not qualified.startswith("torch."):
        return False
    last = qualified.rsplit(".", 1)[1]
    if last in TENSOR_CLASSES:
        return qualified.count(".") == 1 or qualified.startswith("torch.cuda.")
    return qualified.count(".") == 1 and (last in TENSOR_FACTORIES or last in TENSOR_OPS)


def is_optimizer_class(qualified: str) -> bool:
    last = qualified.rsplit(".", 1)[-1]
    return (qualified.startswith(OPTIMIZER_PACKAGES) or "optim" in qualified.lower()) and bool(
        OPTIMIZER_NAME.search(last)
    ) and last[:1].isupper()


# torch.nn modules with no parameters, no buffers and no train/eval difference: a
# container of these that `model.to()` and `.eval()` miss loses nothing.
STATELESS_MODULES = frozenset(
    """Identity Flatten Unflatten ReLU ReLU6 LeakyReLU ELU SELU CELU GELU SiLU Mish Sigmoid
    Tanh Hardtanh Hardswish Hardsigmoid Hardshrink Softshrink Softplus Softsign Tanhshrink
    Threshold LogSigmoid Softmax LogSoftmax Softmin Softmax2d GLU MaxPool1d MaxPool2d
    MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d
    AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d LPPool1d LPPool2d
    Upsample UpsamplingNearest2d UpsamplingBilinear2d PixelShuffle PixelUnshuffle
    ChannelShuffle ZeroPad1d ZeroPad2d ZeroPad3d ConstantPad1d ConstantPad2d ConstantPad3d
    ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d
    ReplicationPad3d CircularPad1d CircularPad2d CircularPad3d CosineSimilarity
    PairwiseDistance""".split()
)
# Losses are stateless unless given a `weight`/`pos_weight` tensor (kept as a buffer).
LOSS_MODULES = frozenset(
    """L1Loss MSELoss SmoothL1Loss HuberLoss BCELoss BCEWithLogitsLoss CrossEntropyLoss
    NLLLoss KLDivLoss CTCLoss PoissonNLLLoss GaussianNLLLoss CosineEmbeddingLoss
    MarginRankingLoss TripletMarginLoss HingeEmbeddingLoss SoftMarginLoss
    MultiLabelSoftMarginLoss MultiLabelMarginLoss MultiMarginLoss""".split()
)


def names_optimizer_class(name: str) -> bool:
    """``optimizer_cls``, ``optim_class``, ``opt_class``: a name that holds an optimizer class."""
    return bool(_OPTIMIZER_CLASS_NAME.match(name))


def is_stateless_module(qualified: str, call: cst.Call) -> bool:
    """``nn.ReLU()``, ``nn.MaxPool2d(2)``, ``nn.MSELoss()``: nothing for ``.to()`` to move."""
    if not qualified.startswith("torch.nn."):
        return False
    last = qualified.rsplit(".", 1)[-1]
    if last in STATELESS_MODULES:
        return True
    return last in LOSS_MODULES and not any(
        a.keyword is None or a.keyword.value in ("weight", "pos_weight") for a in call.args
    )


def plain_literal(expr: cst.BaseExpression | None) -> bool:
    """A value that is certainly not a tensor: a number, string, container display."""
    return isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.FormattedString,
                             cst.ConcatenatedString, cst.List, cst.Tuple, cst.Dict, cst.Set,
                             cst.ListComp, cst.DictComp, cst.SetComp)) or (
        isinstance(expr, cst.Name) and expr.value in ("True", "False")
    )


def is_module_class(qualified: str) -> bool:
    """An nn.Module class named by its import (``torch.nn.Linear``, ``pl.LightningModule``)."""
    last = qualified.rsplit(".", 1)[-1]
    if qualified.startswith("torch.nn.") and last[:1].isupper():
        return last not in ("Parameter", "Buffer") and not qualified.startswith(
            ("torch.nn.utils.", "torch.nn.init.", "torch.nn.functional.")
        )
    return last in MODULE_BASE_NAMES and not qualified.startswith(NON_TORCH_PACKAGES)


def moves_to_cpu(call: cst.Call) -> bool:
    """``.to("cpu")``, ``.to(device="cpu")``, ``.cpu()``, ``.type(torch.FloatTensor)`` (a CPU
    tensor type copies to the CPU): the result is on the CPU."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "cpu":
        return True
    if isinstance(func, cst.Attribute) and func.attr.value == "type":
        first = call.args[0].value if call.args else None
        name = dotted_name(first) if first is not None else None
        return bool(name) and re.fullmatch(r"(torch\.)?\w+Tensor", name) is not None
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "device":
            value = arg.value
            if (  # torch.device("cpu")
                isinstance(value, cst.Call)
                and isinstance(value.func, (cst.Name, cst.Attribute))
                and (value.func.value if isinstance(value.func, cst.Name) else value.func.attr.value)
                == "device"
                and value.args
            ):
                value = value.args[0].value
            if isinstance(value, (cst.Name, cst.Attribute)):  # `cpu_device`, `self._cpu_device`
                name = value.value if isinstance(value, cst.Name) else value.attr.value
                return "cpu" in name.lower()
            return isinstance(value, cst.SimpleString) and value.value.strip("'\"") == "cpu"
    return False


# Torch factories whose first argument is the data (`torch.tensor(w)`).
DATA_FACTORIES = frozenset({"tensor", "as_tensor", "asarray"})


def casts_to_cuda_type(call: cst.Call) -> bool:
    """``x.type(torch.cuda.FloatTensor)`` (or the type's name as a string): a CUDA tensor
    type copies the tensor to the GPU, as ``.cuda()`` does."""
    return cuda_type_cast(call) is not None


# The dtype of each legacy tensor type (`torch.cuda.FloatTensor` holds float32).
TENSOR_TYPE_DTYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
                      "BFloat16Tensor": "bfloat16", "LongTensor": "int64", "IntTensor": "int32",
                      "ShortTensor": "int16", "CharTensor": "int8", "ByteTensor": "uint8", "BoolTensor": "bool"}


def cuda_type_cast(call: cst.Call) -> str | None:
    """The CUDA tensor type ``x.type(torch.cuda.FloatTensor)`` names ("FloatTensor"), or None."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "type" and len(call.args) == 1
            and call.args[0].keyword is None):
        return None
    first = call.args[0].value
    name = first.value.strip("\"'") if isinstance(first, cst.SimpleString) else dotted_name(first) or ""
    parts = name.split(".")
    return parts[-1] if len(parts) >= 2 and parts[-2] == "cuda" and parts[-1].endswith("Tensor") else None


def data_may_be_one_number(call: cst.Call) -> bool:
    """``torch.tensor(v)`` of data the code does not show to hold elements (a value that may
    be one number) may be 0-dim, and a 0-dim CPU tensor meets tensors on any device: only a
    list or tuple written out (``torch.tensor([0.1, 0.2])``) shows more."""
    data = next((a.value for a in call.args if a.keyword is None), None)
    return not (isinstance(data, (cst.List, cst.Tuple, cst.ListComp)) and (
        not isinstance(data, (cst.List, cst.Tuple)) or len(data.elements) > 0))


def changes_dtype_only(call: cst.Call) -> bool:
    """``.to(torch.float16)``, ``.to(x.dtype)``, ``.to(dtype=...)``: no device named."""
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value in ("device", "other"):
                return False
            continue
        value = arg.value
        last = value.attr.value if isinstance(value, cst.Attribute) else (
            value.value if isinstance(value, cst.Name) else None
        )
        return last in DTYPE_NAMES
    return any(a.keyword is not None and a.keyword.value == "dtype" for a in call.args)


def method_call_value(receiver: Value, method: str, call: cst.Call) -> Value:
    """The value of ``receiver.method(...)``."""
    if receiver.kind is Kind.TENSOR:
        if method in NON_TENSOR_METHODS:
            return UNKNOWN
        if method == "cpu" or (method == "type" and moves_to_cpu(call)):
            return CPU_TENSOR
        if method == "type" and casts_to_cuda_type(call):
            return Value(Kind.TENSOR, maybe_accelerator=True, placed=True)
        if method == "to" and changes_dtype_only(call):
            return receiver
        if method in MOVE_METHODS:
            to_cpu = moves_to_cpu(call)
            return Value(Kind.TENSOR, maybe_accelerator=not to_cpu, on_cpu=to_cpu, placed=not to_cpu)
        return receiver
    if receiver.kind is Kind.BATCH and method in MOVE_METHODS and not moves_to_cpu(call) and not (
            method == "to" and changes_dtype_only(call)):
        return Value(Kind.BATCH, maybe_accelerator=True, placed=True)  # `batch.to(device)`
    if receiver.kind is Kind.MODULE and method in MODULE_SELF_METHODS:
        moved = method in MOVE_METHODS and not moves_to_cpu(call) and not (
            method == "to" and changes_dtype_only(call))
        return Value(Kind.MODULE, placed=(receiver.placed or moved) and method != "cpu")
    if receiver.kind is Kind.UNKNOWN:
        # Whatever was moved to a device is there: if it is a tensor (or holds tensors),
        # what is computed from it is too (TDL009). The kind stays unknown.
        if method in MOVE_METHODS and not moves_to_cpu(call) and not (
            method == "to" and changes_dtype_only(call)
        ):
            return MOVED_UNKNOWN
        if receiver.maybe_accelerator and method not in NON_TENSOR_METHODS and not moves_to_cpu(call):
            return receiver  # (`.to("cpu", torch.uint8)` brings it back)
    return UNKNOWN


def keyed_by_strings(function: cst.FunctionDef) -> set[str]:
    """Names the function reads with a string key (``outputs["logits"]``), and names it
    iterates into such a name (``for t in targets: t["boxes"]``): a tensor cannot be
    indexed by a string (nor yields anything that can), so wherever the code runs they hold
    mappings or containers of them, never a tensor with a ``.device``. Nested functions and
    classes are their own scopes and are not read."""
    found: set[str] = set()
    loops: list[tuple[str, str]] = []  # (loop variable, iterated name)

    class _Keys(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Subscript(self, node: cst.Subscript) -> None:
            if (
                isinstance(node.value, cst.Name) and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)
                and isinstance(node.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
            ):
                found.add(node.value.value)

        def _loop(self, node: cst.For | cst.CompFor) -> None:
            if isinstance(node.target, cst.Name) and isinstance(node.iter, cst.Name):
                loops.append((node.target.value, node.iter.value))

        visit_For = visit_CompFor = _loop

    function.visit(_Keys())
    grown = True
    while grown:
        grown = False
        for variable, iterated in loops:
            if variable in found and iterated not in found:
                found.add(iterated)
                grown = True
    return found


# Calls that ask whether a file exists: a save under such a test writes only where the file
# was missing, so what a later load reads may come from elsewhere.
EXISTENCE_QUERIES = frozenset({"exists", "is_file", "isfile"})


# The attributes of a tensor that can be indexed: any other `x.attr[...]` shows `x` is no tensor.
_TENSOR_INDEXED = frozenset({"shape", "data", "grad", "T", "mT", "H", "mH", "real", "imag", "names"})


def indexed_attribute(scope: cst.CSTNode, name: str) -> cst.Subscript | None:
    """The first ``name.attr[...]`` in ``scope`` of an attribute no tensor has
    (``g.ndata["feat"]``, ``batch.x[mask]``): ``name`` holds a graph or a data object, whatever
    the loader it came from suggests; its own ``.to()`` may move its tensors in place."""
    for node in tree.collect(scope, cst.Subscript):
        value = node.value
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and value.value.value == name \
                and value.attr.value not in _TENSOR_INDEXED:
            return node
    return None
