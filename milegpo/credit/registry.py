"""The credit-method registry: a leaf that knows no method. Every list of methods, and every question "which
method reads which CreditConfig field", reads it.

A method is a :class:`CreditMethod`: its name, its two estimators (the plain-Python oracle and the vectorised
pipeline), the arrays its result carries, its variants, the :class:`~milegpo.credit.CreditConfig` fields it
reads (those it brings itself declared as :class:`ConfigField`), and the settings the quality tables measure it
under. Like gymnasium's ``registration.py`` (which imports no environment) this module imports no method and
nothing of :mod:`milegpo.credit` at all: each method's module registers itself, and
``milegpo/credit/__init__.py`` imports those modules in one line (their order is the order of every table).

Who reads it: :func:`milegpo.credit.estimate` (:func:`check_method`, :func:`check_fields`), ``CreditConfig``
(the fields and their checks, :data:`CONFIG_FIELDS`), ``MileGPOConfig`` (``credit_method``, ``credit_variant``,
``credit_overrides``) and the ``--credit_method`` flag's help (``milegpo.job.build_parser``), ``milegpo demo`` /
``replay``, the quality tables, the job's advantage plot and the experiments (:func:`method_variants`).

Adding a method
---------------
One new module, ``milegpo/credit/mine.py``, and its name in the registration line of
``milegpo/credit/__init__.py`` (``from . import paper, hgpo, g2po, beacon, mine``)::

    from .config import CreditConfig, non_negative
    from .reference import ReferenceTerms
    from .registry import ConfigField, CreditMethod, register
    from .vectorized import MethodOutput

    def mine_reference(terms: ReferenceTerms) -> list[float]:    # plain Python: N advantages, input row order
        w = terms.config.mine_weight
        return [w * terms.episode_adv[i] for i in range(len(terms.rows))]

    def mine_tables(rows, row_values, config: CreditConfig, variant: str) -> MethodOutput:  # the torch pipeline
        return MethodOutput(config.mine_weight * row_values["episode_adv"], row_values)

    register(CreditMethod(
        "mine", "A = mine_weight * Norm_q(Z)", mine_reference, mine_tables,
        row_keys=("episode_score", "episode_adv"),
        fields=(ConfigField("mine_weight", 0.5, "the weight of the episode term (eq. ...)", float, non_negative),)))

Its fields are then CreditConfig fields (``presets.ALFWORLD.replace(mine_weight=2.0)``, ``--credit_overrides
'{"mine_weight": 2.0}'``), ``mine`` is a choice of ``--credit_method`` and a row of every table, and a field it
does not read is refused when a run of it changes one (:func:`check_fields`). ``tests/credit/test_methods.py``
registers such a method from the test module and finds it in each of those places.

What "changes a field" means: a :class:`~milegpo.credit.CreditConfig` remembers the fields named since the
preset it was built from (``CreditConfig(...)``, ``.replace(...)``, ``--credit_overrides``); a preset's own values
are never refused (a preset holds the fields of every method, and each method reads its own), and
``config.as_preset()`` makes any config one (what a comparison of several methods under one config does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from milegpo_kernels.scoring import VARIANTS  # the variants a method may have: MileGPO's, as graph_scores computes


@dataclass(frozen=True)
class ConfigField:
    """One field of :class:`~milegpo.credit.CreditConfig`, declared by ``milegpo/credit/config.py`` (the paper's
    parameters and the episode term's) or by the method that reads it (:attr:`CreditMethod.fields`).

    name: the attribute (``config.hgpo_history``, a key of ``--credit_overrides``); default: its value in every
    preset that does not set it; help: what it changes, with the equation it enters; kind: ``bool``, ``int``,
    ``float``, or a tuple of the names it takes (a choice, the spec's reading first); check: ``check(name,
    value)`` raising a ValueError that names ``CreditConfig.<name>`` for a value out of range (the kind is checked
    before); every_method: read by every method (the episode term, eq. 22, which every result carries);
    world_defaults: ``((world, value), ...)``, its value in the presets of a world where that differs from
    ``default`` (a method whose official scripts differ per benchmark: BEACON's ``("webshop", 0.95)``): a preset of
    that world (:attr:`milegpo.credit.CreditConfig.world`, ``presets.WEBSHOP`` and those built from it) reads it
    there, whenever the method registered."""

    name: str
    default: Any
    help: str
    kind: Any
    check: Callable[[str, Any], None] | None = None
    every_method: bool = False
    world_defaults: tuple[tuple[str, Any], ...] = ()

    def default_in(self, world: str | None) -> Any:
        """Its value in a preset of ``world`` (None: a config of no world, ``CreditConfig()``): ``default`` unless
        :attr:`world_defaults` names the world."""
        return dict(self.world_defaults).get(world, self.default) if world is not None else self.default

    def __post_init__(self):
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ValueError(f"ConfigField {self.name!r}: a field's name is a public identifier")
        if not (self.kind in (bool, int, float) or (isinstance(self.kind, tuple) and self.kind
                                                     and all(isinstance(c, str) for c in self.kind))):
            raise ValueError(f"ConfigField {self.name!r}: kind must be bool, int, float or a tuple of names, got "
                             f"{self.kind!r}")


@dataclass(frozen=True)
class CreditMethod:
    """One credit method.

    name: what ``estimate(batch, name)`` and ``--credit_method`` take.
    summary: one line, what its advantage is (the spec's equation).
    reference: ``(ReferenceTerms) -> list[float]``, the N advantages by the plain-Python oracle
      (:func:`milegpo.credit.reference.estimate_reference` hands it the batch's rows, task groups and
      Norm_q(Z); it fills ``row_vals`` / ``node_vals``).
    vectorized: ``(GroupOrderedRows, row_values, CreditConfig, variant) -> MethodOutput``, the same on the
      torch / Triton pipeline (:func:`milegpo.credit.vectorized.credit_tables` hands it the ordered rows with
      ``episode_score`` / ``episode_adv`` and keeps the arrays of :attr:`row_keys` / :attr:`node_keys`).
    row_keys: the per-row arrays of its result (``CreditResult.rows``), in this order.
    node_keys: its per-node arrays (``CreditResult.nodes``; empty: no rollout graph).
    variants: the variants whose advantages differ (MileGPO's ``md`` / ``rcs`` / ``full``); a method of one
      variant is run as ``full``, and another variant is refused (:func:`check_method`).
    fields: the CreditConfig fields it reads besides the episode term's (:attr:`ConfigField.every_method`): the
      name of a field declared elsewhere (``"gamma"``), or a :class:`ConfigField` it brings (registering the
      method declares it).
    settings: more settings the quality tables measure it under: label -> CreditConfig changes (of its fields).
    check: ``check(config)`` raising a ValueError for a combination of its fields that cannot run (each field's
      own range is its :attr:`ConfigField.check`); run on every CreditConfig that is built.
    batch_check: ``batch_check(batch)``, run by :func:`milegpo.credit.estimate` on every batch the method is given:
      a warning or an error about what the batch lacks for it (BEACON: a batch without a milestone row).
    """

    name: str
    summary: str
    reference: Callable[..., list]
    vectorized: Callable[..., Any]
    row_keys: tuple[str, ...]
    node_keys: tuple[str, ...] = ()
    variants: tuple[str, ...] = ("full",)
    fields: tuple[str | ConfigField, ...] = ()
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    check: Callable[[Any], None] | None = None
    batch_check: Callable[[Any], None] | None = None

    def __post_init__(self):
        unknown = [v for v in self.variants if v not in VARIANTS]
        if not self.name or not self.variants or unknown:
            raise ValueError(f"CreditMethod {self.name!r}: needs a name and variants of {VARIANTS}, got "
                             f"{self.variants}")
        wrong = [f for f in self.fields if not isinstance(f, (str, ConfigField))]
        if wrong:
            raise TypeError(f"CreditMethod {self.name!r}: fields are names or ConfigFields, got {wrong!r}")

    @property
    def field_names(self) -> tuple[str, ...]:
        """The names of the fields it reads besides the episode term's."""
        return tuple(f if isinstance(f, str) else f.name for f in self.fields)

    def reads(self, name: str) -> bool:
        """Whether it reads CreditConfig field ``name`` (its own fields and the episode term's)."""
        declared = CONFIG_FIELDS.get(name)
        return name in self.field_names or (declared is not None and declared.every_method)

    def display_name(self, variant: str) -> str:
        """How the job names a run of it: ``milegpo/full`` for a method of several variants, else its name."""
        return f"{self.name}/{variant}" if len(self.variants) > 1 else self.name

    def labels(self) -> dict[str, tuple[str, str, dict]]:
        """label -> (method, variant, CreditConfig changes): one per variant (``milegpo-md``...; the name
        alone for a method of one variant), then its :attr:`settings`."""
        several = len(self.variants) > 1
        out = {f"{self.name}-{v}" if several else self.name: (self.name, v, {}) for v in self.variants}
        out.update({label: (self.name, self.variants[-1], dict(changes)) for label, changes in self.settings.items()})
        return out


#: name -> CreditMethod, in registration order (the order every table and plot lists them)
METHODS: dict[str, CreditMethod] = {}
#: name -> ConfigField: every CreditConfig field, in declaration order (config.py's, then each method's)
CONFIG_FIELDS: dict[str, ConfigField] = {}
#: the config checks of the methods' field combinations (:attr:`CreditMethod.check`), by method name
_CHECKS: dict[str, Callable[[Any], None]] = {}


def declare_fields(*fields: ConfigField) -> None:
    """Declare CreditConfig fields (``milegpo/credit/config.py``'s; a method's come with :func:`register`). A name
    declared already is an error unless the declaration is the same one."""
    for f in fields:
        if not isinstance(f, ConfigField):
            raise TypeError(f"declare_fields: expected ConfigFields, got {type(f).__name__}")
        if f.name in CONFIG_FIELDS and CONFIG_FIELDS[f.name] != f:
            raise ValueError(f"CreditConfig field {f.name!r} is declared already (by config.py or another method): "
                             "name the method's own fields with its prefix")
    for f in fields:
        CONFIG_FIELDS[f.name] = f


def register(method: CreditMethod, replace: bool = False) -> CreditMethod:
    """Add ``method`` to :data:`METHODS` and the fields it brings to :data:`CONFIG_FIELDS` (a name taken is an error
    unless ``replace``); every field it names must be declared, and every setting must change fields it reads.
    Returns it."""
    if not isinstance(method, CreditMethod):
        raise TypeError(f"register: expected a CreditMethod, got {type(method).__name__}")
    if method.name in METHODS and not replace:
        raise ValueError(f"register: a credit method {method.name!r} is registered already (replace=True to "
                         "replace it)")
    own = [f for f in method.fields if isinstance(f, ConfigField)]
    if replace and method.name in METHODS:
        _drop_fields(METHODS[method.name])
    declare_fields(*own)
    missing = [name for name in method.field_names if name not in CONFIG_FIELDS]
    unread = sorted({k for changes in method.settings.values() for k in changes if not method.reads(k)}
                    - set(missing))
    if missing or unread:
        for f in own:
            CONFIG_FIELDS.pop(f.name, None)
        problem = (f"names undeclared CreditConfig field(s) {missing}" if missing else
                   f"has settings that change fields it does not read: {unread}")
        raise ValueError(f"register: credit method {method.name!r} {problem}")
    METHODS[method.name] = method
    if method.check is not None:
        _CHECKS[method.name] = method.check
    else:
        _CHECKS.pop(method.name, None)
    return method


def unregister(name: str) -> CreditMethod:
    """Remove method ``name`` and the fields it brought (tests; an unknown name is a ValueError); returns it."""
    method = get_method(name)
    del METHODS[name]
    _CHECKS.pop(name, None)
    _drop_fields(method)
    return method


def _drop_fields(method: CreditMethod) -> None:
    for f in method.fields:
        if isinstance(f, ConfigField) and CONFIG_FIELDS.get(f.name) == f:
            del CONFIG_FIELDS[f.name]


def get_method(name: str) -> CreditMethod:
    """The registered method ``name``; an unknown name is a ValueError listing the known ones."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown credit method {name!r}; expected one of {tuple(METHODS)}") from None


def check_method(method: str, variant: str) -> CreditMethod:
    """The method ``method`` when ``variant`` is one of its variants; an unknown method, an unknown variant or a
    variant the method does not have (``hgpo`` with ``md``) is a ValueError. Returns the method."""
    spec = get_method(method)
    if variant not in VARIANTS:
        raise ValueError(f"unknown MileGPO variant {variant!r}; expected one of {VARIANTS}")
    if variant not in spec.variants:
        raise ValueError(f"credit method {method!r} has the variant(s) {', '.join(spec.variants)} only, got "
                         f"{variant!r}")
    return spec


def field_readers(name: str) -> tuple[str, ...]:
    """The registered methods that read CreditConfig field ``name``, in registration order."""
    return tuple(m.name for m in METHODS.values() if m.reads(name))


def unread_fields(method: str, names) -> list[str]:
    """The fields of ``names`` that method ``method`` does not read, in declaration order."""
    spec = get_method(method)
    order = {name: i for i, name in enumerate(CONFIG_FIELDS)}
    return sorted((name for name in names if not spec.reads(name)), key=lambda name: order.get(name, len(order)))


def check_fields(method: str, names) -> None:
    """Refuse, in one ValueError line, CreditConfig fields ``names`` (those a run changes) that method ``method``
    does not read: it names each field and the methods that do read it. Fields nobody reads are unknown ones
    (CreditConfig refuses those itself)."""
    unread = unread_fields(method, names)
    if unread:
        which = "; ".join(f"{name} (read by {', '.join(field_readers(name)) or 'no registered method'})"
                          for name in unread)
        raise ValueError(f"credit method {method!r} does not read {which}: change only the fields it reads (a "
                         "preset's own values are never refused)")


def config_checks() -> tuple[Callable[[Any], None], ...]:
    """The registered methods' checks of their field combinations (:attr:`CreditMethod.check`)."""
    return tuple(_CHECKS.values())


def method_variants(settings: bool = True) -> dict[str, tuple[str, str, dict]]:
    """label -> (method, variant, CreditConfig changes) of every registered method's variants, and with
    ``settings`` their extra settings: the rows of the quality tables, the job's advantage plot and the
    method comparisons (``grpo``, ``gigpo``, ``gigpo-verl``, ``graphgpo``, ``milegpo-md``, ``milegpo-rcs``,
    ``milegpo-full``...)."""
    out: dict[str, tuple[str, str, dict]] = {}
    for method in METHODS.values():
        labels = method.labels()
        out.update(labels if settings else {k: v for k, v in labels.items() if k not in method.settings})
    return out


def run_variant(method: str, variant: str) -> str:
    """The variant a run of ``method`` takes when several methods run with ``variant`` (``milegpo demo --variant
    md``): ``variant`` where the method has it, else its last (``full``, a method of one variant)."""
    spec = get_method(method)
    return variant if variant in spec.variants else spec.variants[-1]


__all__ = ["ConfigField", "CreditMethod", "METHODS", "CONFIG_FIELDS", "VARIANTS", "declare_fields",
           "register", "unregister", "get_method", "check_method", "check_fields", "unread_fields", "field_readers",
           "config_checks", "method_variants", "run_variant"]
