"""The verdict as data: what `loopscale.fit.verdict` returns and a fit record stores as "conditioning", with one
JSON form (`to_json` writes it, `from_json` reads it back; the keys are those fit JSONs have always had):

    "conditioning": {
      "checks": [{"name", "protects", "target", "value", "ok"}, ...],  # Check ("protects" absent before issue 38)
      "warnings": [str],          # failed checks that do not block: "<protects> not warranted: <why>"
      "verdict": str,             # "phi measured: ...", "not measured: <reasons>", or the delta-phi lines
      "measured": bool,
      "noise": {"sigma_log", "source"},  # NoiseScale the checks were judged against (absent from `compare`)
      "blocking": [str],          # only where the blocking checks protect other things (the test-time law)
      "delta_phi": {recipe: {"estimate", "interval", "source", "se", "mde", "answer", "line"}},  # DeltaAnswer
      "mde_formula": str,         # with delta_phi (a joint fit, `compare`)
    }

A key absent from the JSON is None in the dataclass and stays absent when written. The package reads fields;
`record["verdict"]` and `.get` read a field by its JSON key, for code written against the JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

from loopscale.errors import InputError


class JsonKeys:
    """A field by its JSON key (`record["verdict"]`, `record.get("delta_phi")`), as on the JSON object."""

    def __getitem__(self, key: str):
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default=None):
        value = getattr(self, key) if key in self.__dataclass_fields__ else None
        return default if value is None else value

    def __contains__(self, key: str) -> bool:
        return self.get(key) is not None


@dataclass(frozen=True)
class Check(JsonKeys):
    """One check of the verdict: its name, what a failure costs (`verdict.PROTECTS`), the target, the value and
    whether it holds. `reason` (a failure in the verdict's words) is not written: the verdict and the warnings
    carry it."""

    name: str
    protects: str | None  # None in a record from before issue 38 (every failure blocked)
    target: str | float | None
    value: str | float | list | None
    ok: bool
    reason: str = ""

    def __post_init__(self):
        object.__setattr__(self, "ok", bool(self.ok))  # a numpy comparison's bool_ is written as JSON's bool

    def to_json(self) -> dict:
        out = {"name": self.name, "protects": self.protects, "target": self.target, "value": self.value}
        if self.protects is None:
            del out["protects"]
        return {**out, "ok": self.ok}

    @classmethod
    def from_json(cls, d: Mapping) -> Check:
        return cls(d.get("name", ""), d.get("protects"), d.get("target"), d.get("value"), bool(d.get("ok")))


@dataclass(frozen=True)
class NoiseScale(JsonKeys):
    """The standard deviation of log L a single run scatters by (`verdict.noise_of`) and where it comes from."""

    sigma_log: float
    source: str

    def to_json(self) -> dict:
        return {"sigma_log": self.sigma_log, "source": self.source}


@dataclass(frozen=True)
class DeltaAnswer(JsonKeys):
    """A difference's one answer (`verdict.delta_answer`): "real", "no difference" or "not measured", with the
    estimate, the 95% interval it read ([low, high], None without one) and its name, se, the design's MDE and
    the line that says it."""

    estimate: float
    interval: list | tuple | None
    source: str
    se: float | None
    mde: float | None
    answer: str
    line: str

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, d: Mapping) -> DeltaAnswer:
        return cls(*(d.get(f.name) for f in fields(cls)))


@dataclass(frozen=True)
class Conditioning(JsonKeys):
    """A fit's checks and verdict (module docstring): the record's "conditioning"."""

    checks: list[Check]
    warnings: list[str]
    verdict: str | None
    measured: bool
    noise: NoiseScale | None = None
    blocking: tuple[str, ...] | None = None  # what the blocking checks protect, when not verdict.BLOCKING
    delta_phi: dict[str, DeltaAnswer] | None = None
    mde_formula: str | None = None

    def to_json(self) -> dict:
        out = {
            "checks": [c.to_json() for c in self.checks],
            "warnings": list(self.warnings),
            "verdict": self.verdict,
            "measured": self.measured,
            "noise": None if self.noise is None else self.noise.to_json(),
            "blocking": None if self.blocking is None else list(self.blocking),
            "delta_phi": None if self.delta_phi is None else {g: a.to_json() for g, a in self.delta_phi.items()},
            "mde_formula": self.mde_formula,
        }
        optional = ("noise", "blocking", "delta_phi", "mde_formula")
        return {k: v for k, v in out.items() if v is not None or k not in optional}

    @classmethod
    def from_json(cls, d) -> Conditioning:
        """The record's block read back; one line (InputError) when it is not one (a fit record edited by hand)."""
        if not isinstance(d, Mapping):
            raise InputError(f"the fit's 'conditioning' must be a dict; got {type(d).__name__}")
        if d.get("verdict") is not None and not isinstance(d["verdict"], str):
            raise InputError(f"the fit's verdict must be text; got {type(d['verdict']).__name__}")
        noise, blocking, deltas = d.get("noise"), d.get("blocking"), d.get("delta_phi")
        return cls(
            [Check.from_json(c) for c in d.get("checks") or [] if isinstance(c, Mapping)],
            list(d.get("warnings") or []),
            d.get("verdict"),
            bool(d.get("measured")),
            NoiseScale(noise.get("sigma_log"), noise.get("source")) if isinstance(noise, Mapping) else None,
            None if blocking is None else tuple(blocking),
            None if deltas is None else {g: DeltaAnswer.from_json(a) for g, a in deltas.items()},
            d.get("mde_formula"),
        )


def as_conditioning(cond) -> Conditioning | None:
    """A Conditioning from itself or its JSON form; None for none (an empty block: a record without checks)."""
    if not cond:
        return None
    return cond if isinstance(cond, Conditioning) else Conditioning.from_json(cond)
