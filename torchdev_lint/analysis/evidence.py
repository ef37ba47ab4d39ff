"""What a parameter is, judged by how the function uses it.

An unannotated parameter is UNKNOWN to the value analysis, yet ``def step(x): x.view(-1)``
says ``x`` is a tensor and ``def fit(net): net.eval()`` says ``net`` is a module. Each use
of a method or attribute only one of them has is a piece of evidence; a name with evidence
of both kinds (or of neither) stays UNKNOWN: we prefer silence to noise.
"""

from __future__ import annotations

import libcst as cst

from torchdev_lint.analysis import kinds
from torchdev_lint.analysis.kinds import Kind
from torchdev_lint.analysis.tree import walk

# Attributes and methods tensors have and modules do not.
TENSOR_USES = frozenset(
    """contiguous view view_as reshape reshape_as shape size dim ndim numel unsqueeze squeeze
    permute transpose detach item masked_fill masked_fill_ expand expand_as flatten clone
    type_as new_zeros new_ones new_full new_empty new_tensor index_select narrow chunk split
    unbind is_contiguous element_size storage_offset tolist argmax argmin softmax sum mean
    max min""".split()
)
# Methods modules have and tensors do not.
MODULE_USES = frozenset(
    """parameters named_parameters buffers named_buffers modules named_modules children
    named_children eval train state_dict load_state_dict zero_grad register_buffer
    register_parameter register_forward_hook register_forward_pre_hook add_module
    get_submodule""".split()
)


def kind_by_use(function: cst.FunctionDef, name: str) -> kinds.Value:
    """TENSOR, MODULE or BATCH if the uses of ``name`` in ``function`` all point one way.
    A mapping unpacked into a call's keywords (``model(**batch)``) is a batch: a dict of
    modules or of settings is not spread into a call that also moves its entries."""
    seen: set[Kind] = set()

    def enter(node: cst.CSTNode) -> bool:
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
            if node.value.value == name:
                attr = node.attr.value
                if attr in TENSOR_USES:
                    seen.add(Kind.TENSOR)
                elif attr in MODULE_USES:
                    seen.add(Kind.MODULE)
        elif isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value == name:
                seen.add(Kind.MODULE)  # called: a module (or any callable), never a tensor
            if any(a.star == "**" and isinstance(a.value, cst.Name) and a.value.value == name
                   for a in node.args):
                seen.add(Kind.BATCH)
        return True

    walk(function.body, enter)
    if seen == {Kind.TENSOR}:
        return kinds.TENSOR
    if seen == {Kind.MODULE}:
        return kinds.MODULE
    if seen == {Kind.BATCH}:
        return kinds.Value(Kind.BATCH)
    return kinds.UNKNOWN
