"""Short names for CUDA kernels, so that a row of explain's table fits a screen.

A profiled GPU step names each kernel by its whole C++ signature: templates, lambdas, parameters, up to a thousand
characters. The short name keeps the kernel's function, the functors and kernels its template names, and the first
element type, as `elementwise_kernel<direct_copy_kernel_cuda, Half>`. A name with neither templates nor parameters,
an operator's (`aten::copy_`) or a cuDNN kernel's, stays whole. Where two names of one table shorten to the same,
each is numbered. The whole names stay in each run's trace.
"""

import re
from collections import Counter

LONG = 60  # characters: shorter names stay whole
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# what a template names that says what the kernel computes
COMPUTES = re.compile(r"kernel|[Ff]unctor|Ops$|^launch_")
WRAPPERS = {"gpu_kernel_impl_nocast", "gpu_kernel_impl"}
DTYPES = {"Half": "Half", "BFloat16": "BFloat16", "__half": "half", "__nv_bfloat16": "bfloat16", "float": "float",
          "double": "double", "long": "long", "int": "int", "bool": "bool"}  # fmt: skip


def _split(signature: str) -> tuple[str, str]:
    """The function's qualified name and its template arguments, without its parameters."""
    depth, head, template = 0, None, []
    for index, char in enumerate(signature):
        if char == "<":
            if depth == 0 and head is None:
                head = signature[:index]
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == "(" and depth == 0:
            return (head if head is not None else signature[:index]), "".join(template)
        if head is not None and depth > 0:
            template.append(char)
    return (head if head is not None else signature), "".join(template)


def short_name(name: str) -> str:
    """The kernel's short name; a short or plain name as it is."""
    if len(name) <= LONG or not any(c in name for c in "<("):
        return name
    signature = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    head, template = _split(signature)
    function = head.rsplit("::", 1)[-1].strip()
    found = IDENTIFIER.findall(template)
    computes = [i for i in dict.fromkeys(found) if COMPUTES.search(i) and i not in WRAPPERS and i != function]
    dtype = next((DTYPES[i] for i in found if i in DTYPES), None)
    inside = [*computes[:2], *([dtype] if dtype else [])]
    return f"{function}<{', '.join(inside)}>" if inside else function


def short_names(names: list[str]) -> dict[str, str]:
    """Each name's short name among `names`: those that shorten to the same are numbered in the order given."""
    shortened = {name: short_name(name) for name in dict.fromkeys(names)}
    twins, seen = Counter(shortened.values()), Counter()
    for name, short in shortened.items():
        if twins[short] > 1:
            seen[short] += 1
            shortened[name] = f"{short} #{seen[short]}"
    return shortened
