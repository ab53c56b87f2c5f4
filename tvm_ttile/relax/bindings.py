"""(TVM) What the Relax rewrites share: a variable's binding, a static shape, and a module with some operator calls
replaced by call_tir of kernels of our own (AutoMCL's dense kernels, automcl/network.py; Winograd convolutions,
winograd.py)."""
from __future__ import annotations

import tvm
from tvm import relax


def binding_of(mutator, expr):
    """What a variable of the function `mutator` visits is bound to, through variables bound to variables."""
    while isinstance(expr, relax.Var):
        bound = mutator.lookup_binding(expr)
        if bound is None:
            return expr
        expr = bound
    return expr


def is_op(call, name: str) -> bool:
    """Whether `call` calls the Relax operator `name` (e.g. "relax.nn.conv2d")."""
    return isinstance(call, relax.Call) and isinstance(call.op, tvm.ir.Op) and call.op.name == name


def constant_value(mutator, expr):
    """The numpy value of a constant (through variable bindings), else None."""
    expr = binding_of(mutator, expr)
    return expr.value.numpy() if isinstance(expr, tvm.ir.expr.Constant) else None


def mutate_functions(mod, make):
    """`mod` with every Relax function visited by one mutator `make(mod)`, whose builder also holds the PrimFuncs
    it adds."""
    mutator = make(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def static_shape(expr) -> tuple | None:
    """The shape of `expr` as ints, or None when it is not static."""
    shape = getattr(getattr(expr, "ty", None), "shape", None)
    values = getattr(shape, "values", None)
    if values is None or not all(isinstance(v, tvm.tirx.IntImm) for v in values):
        return None
    return tuple(int(v) for v in values)


def replace_calls(mod, replace):
    """`mod` (constants folded first: a weight's permute becomes the constant) with each call that
    replace(call, add_func) turns into another expression replaced (None: kept). add_func(name, make) adds the
    PrimFunc make() under `name` the first time it is asked for and returns its GlobalVar. Returns (module,
    calls replaced)."""
    mod = relax.transform.FoldConstant()(mod)

    @relax.expr_functor.mutator
    class Replacer(relax.PyExprMutator):
        def __init__(self, m):
            super().__init__(m)
            self.added, self.count = {}, 0

        def add_func(self, name, make):
            if name not in self.added:
                self.added[name] = self.builder_.add_func(make(), name)
            return self.added[name]

        def visit_call_(self, call):
            call = super().visit_call_(call)
            new = replace(call, self.add_func)
            if new is None:
                return call
            self.count += 1
            return new

    replacer = Replacer(mod)
    for gv, func in list(mod.functions.items()):
        if isinstance(func, relax.Function):
            replacer.builder_.update_func(gv, replacer.visit_expr(func))
    return replacer.builder_.get(), replacer.count
