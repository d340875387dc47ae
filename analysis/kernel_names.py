"""Short names for CUDA kernels, so that a row of explain's table fits a screen.

A profiled GPU step names each kernel by its whole C++ signature: return type, templates, lambdas, parameters, up to a
thousand characters. The short name keeps the kernel's function, the functors and kernels its template names, and its
element type (the data's before an index's), as `elementwise_kernel<direct_copy_kernel_cuda, Half>`. A generic
function keeps what names it: `gemvx::kernel`, CUTLASS's `Kernel2<its GEMM>`. A name with neither templates nor
parameters, an operator's (`aten::copy_`) or a cuDNN kernel's, stays whole. Where two names of one table shorten to the
same, each is numbered. The whole names stay in each run's trace.
"""

import re
from collections import Counter

LONG = 60  # characters: shorter names stay whole
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# what a template names that says what the kernel computes
COMPUTES = re.compile(r"kernel|[Ff]unctor|Ops$|^launch_")
WRAPPERS = {"gpu_kernel_impl_nocast", "gpu_kernel_impl"}
GENERIC = {"Kernel", "Kernel2", "device_kernel"}  # functions named by what their template runs
DTYPES = {"Half": "Half", "BFloat16": "BFloat16", "__half": "Half", "__nv_bfloat16": "BFloat16", "float": "float",
          "double": "double", "long": "long", "int": "int", "bool": "bool"}  # fmt: skip
FLOATS = {"Half", "BFloat16", "float", "double"}


def _split(signature: str) -> tuple[str, str]:
    """The function's qualified name and its template arguments, without its return type and parameters."""
    depth, start, end = 0, 0, len(signature)
    for index, char in enumerate(signature):
        if char in "<(" and not (char == "(" and depth == 0):
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "(" and depth == 0:  # the parameters
            end = index
            break
        elif char == " " and depth == 0:  # what came before is a return type
            start = index + 1
    declarator = signature[start:end]
    head, _, template = declarator.partition("<")
    return head, template


def short_name(name: str) -> str:
    """The kernel's short name; a short or plain name as it is."""
    if len(name) <= LONG or not any(c in name for c in "<("):
        return name
    signature = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    head, template = _split(signature)
    function = head.rsplit("::", 1)[-1].strip()
    if function == "kernel":  # cuBLAS's internal::gemvx::kernel: its namespace says what it runs
        function = "::".join(head.rsplit("::", 2)[-2:]).strip()
    found = IDENTIFIER.findall(template)
    computes = [i for i in dict.fromkeys(found) if COMPUTES.search(i) and i not in WRAPPERS and i != function]
    if function in GENERIC and found:  # CUTLASS's Kernel2<its GEMM's name>
        computes = [found[0]]
    dtypes = [DTYPES[i] for i in found if i in DTYPES]
    dtype = next((d for d in dtypes if d in FLOATS), dtypes[0] if dtypes else None)  # an index type after data
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
