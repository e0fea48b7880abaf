"""GradRegistry: (domain, op_type) -> the rule that builds its backward nodes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .builder import GradContext, op_label

#: A rule: reads the forward node through the context, appends backward
#: nodes to it, returns {forward input position: name of its gradient}.
GradBuilder = Callable[[GradContext], dict[int, str]]


def _key(domain: str, op_type: str) -> tuple[str, str]:
    # ai.onnx and '' are the same domain in a model
    return ("" if domain == "ai.onnx" else domain, op_type)


class GradRegistry:
    """Maps (domain, op_type) to a :data:`GradBuilder`.  Registries are
    independent: adding a rule to one changes no other."""

    def __init__(self):
        self._rules: dict[tuple[str, str], GradBuilder] = {}

    def register(self, domain: str, op_type: str, builder: GradBuilder, *,
                 replace: bool = False) -> None:
        """Adds a rule; for an operator that has one already, ValueError
        unless ``replace`` is true."""
        if not callable(builder):
            raise TypeError(f"GradRegistry.register: the rule of {op_label(domain, op_type)} "
                            f"must be callable, got {type(builder).__name__}")
        key = _key(domain, op_type)
        if key in self._rules and not replace:
            raise ValueError(f"GradRegistry: {op_label(*key)} already has a gradient rule "
                             "(pass replace=True to replace it)")
        self._rules[key] = builder

    def builder(self, domain: str, op_type: str) -> GradBuilder | None:
        """The rule of the operator, or None."""
        return self._rules.get(_key(domain, op_type))

    def __contains__(self, key) -> bool:
        return isinstance(key, tuple) and len(key) == 2 and _key(*key) in self._rules

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(sorted(self._rules))

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"GradRegistry({[op_label(*k) for k in self]})"


def register_custom_gradients(registry: GradRegistry | None = None) -> GradRegistry:
    """Adds the BiasGelu, CDist, GroupQueryAttention and MatMulNBits rules
    to ``registry`` (a new independent one when None; rules it held for
    these four are replaced) and returns it."""
    from . import bias_gelu, cdist, group_query_attention, matmul_nbits

    if registry is None:
        registry = GradRegistry()
    elif not isinstance(registry, GradRegistry):
        raise TypeError(f"register_custom_gradients expects a GradRegistry or None, "
                        f"got {type(registry).__name__}")
    for rule in (bias_gelu, cdist, group_query_attention, matmul_nbits):
        registry.register(rule.DOMAIN, rule.OP_TYPE, rule.gradient, replace=True)
    return registry


_DEFAULT: list[GradRegistry] = []


def default_registry() -> GradRegistry:
    """The package's own rules, built once; what :func:`gradient_model` and
    the support inventory use when given no registry.  Treat it as read-only:
    add rules to a registry of your own."""
    if not _DEFAULT:
        _DEFAULT.append(register_custom_gradients())
    return _DEFAULT[0]
