"""Where things are: the repository, its test fixtures (tests/fixtures/, provenance in its README)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS = REPO_ROOT / "tests"
FIXTURES = TESTS / "fixtures"
CHINCHILLA = FIXTURES / "chinchilla_svg_extracted.csv"  # Hoffmann et al. points, provenance in fixtures/README.md
