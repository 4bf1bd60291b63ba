"""The public surface of lossless.providers and lossless.testing."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("module", ["lossless.providers", "lossless.testing"])
def test_all_is_sorted_and_importable(module):
    mod = importlib.import_module(module)
    assert mod.__all__ == sorted(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None
