"""Knob descriptions and names, from the library itself (ffpaGetPolicyInfo)."""

import ctypes
import dataclasses
import functools

from . import _types as t
from ._errors import check
from ._library import library


@dataclasses.dataclass(frozen=True)
class PolicyInfo:
    """Everything the library says about one knob (ffpaPolicyInfo_t)."""
    knob: int                 #: the knob's value (a :class:`Knob` when this package knows it)
    name: str                 #: e.g. ``"FFPA_POLICY_STAGES"``
    type: t.PolicyType        #: the value type
    min: int                  #: smallest accepted value (0 for strings)
    max: int                  #: largest accepted value (the longest length for strings)
    default: int              #: value without setter or environment (numeric types)
    environment: tuple        #: variables read when a handle is created, primary first
    value_names: tuple        #: names of the values from ``min`` up (booleans, enumerations)
    default_string: str       #: the default as text
    description: str          #: one sentence

    @property
    def short_name(self):
        """The name without ``FFPA_POLICY_``, lower case: ``"stages"``."""
        return self.name.removeprefix("FFPA_POLICY_").lower()


def _text(value):
    return value.decode() if value else ""


def policy_info(knob):
    """Describes a knob, given as a :class:`Knob`, its value or its name; needs no handle."""
    number = knob_value(knob)
    info = t.PolicyInfoStruct(structSize=ctypes.sizeof(t.PolicyInfoStruct))
    check(library().ffpaGetPolicyInfo(number, ctypes.byref(info)))
    try:
        number = t.Knob(number)
    except ValueError:
        pass  # a knob newer than this package: still usable by value and name
    return PolicyInfo(
        knob=number, name=_text(info.name), type=t.PolicyType(info.type),
        min=info.minValue, max=info.maxValue, default=info.defaultValue,
        environment=tuple(_text(info.environment).split()),
        value_names=tuple(_text(info.valueNames).split()),
        default_string=_text(info.defaultString), description=_text(info.description))


def knobs():
    """Every knob the loaded library knows, as :class:`PolicyInfo`, in increasing order."""
    return [policy_info(k) for k in _knob_values()]


@functools.lru_cache(maxsize=None)
def _knob_values():
    lib = library()
    count = ctypes.c_int32()
    check(lib.ffpaGetPolicyKnobs(0, ctypes.byref(count), None))
    values = (ctypes.c_int32 * count.value)()
    check(lib.ffpaGetPolicyKnobs(count.value, ctypes.byref(count), values))
    return tuple(values[:count.value])


@functools.lru_cache(maxsize=None)
def _names():
    names = {}
    for number in _knob_values():
        info = t.PolicyInfoStruct(structSize=ctypes.sizeof(t.PolicyInfoStruct))
        check(library().ffpaGetPolicyInfo(number, ctypes.byref(info)))
        full = _text(info.name).upper()
        names[full] = number
        names[full.removeprefix("FFPA_POLICY_")] = number
    return names


def knob_value(knob):
    """The int value of a knob given as a :class:`Knob`, an int, or a name in any case, with
    or without the ``FFPA_POLICY_`` prefix."""
    if isinstance(knob, str):
        try:
            return _names()[knob.strip().upper()]
        except KeyError:
            known = ", ".join(sorted(n for n in _names() if not n.startswith("FFPA_")))
            raise ValueError(f"unknown knob {knob!r}; the library knows: {known.lower()}") from None
    return int(knob)
